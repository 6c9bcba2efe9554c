// fuzzy_recall (MAD's fuzzy in-context recall): every sampled sequence read back by a parser of
// the documented layout — pads, then runs of key tokens each followed by a run of value tokens
// (or a run of noise), the copy prefix, the probe key and its value; with multi_query no prefix
// and the final pair the probe — which checks the runs' sizes and distinct tokens, that a key
// keeps its value, that the probe's pair is in the context, the next-token targets and the mask;
// the motif sizes drawn; the documented example; the options' errors.

#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::build_task;
using memscript::test::row;

namespace {

struct Setting {
  int64_t vocab, key_size, value_size, noise_vocab;
  double noise;
  bool test;
  bool multi_query = false;
};

std::shared_ptr<Task> make(const Setting& s) {
  return build_task("fuzzy_recall", [&](Options& o) {
    o.set("vocab", {s.vocab});
    o.set("key_size", {s.key_size});
    o.set("value_size", {s.value_size});
    o.set("noise_vocab", {s.noise_vocab});
    o.set("noise", {s.noise});
    o.set("test", {s.test});
    o.set("multi_query", {s.multi_query});
  });
}

enum class Kind { key, value, noise, pad, prefix };

struct Pair {
  std::vector<int64_t> key, value;
  size_t value_at;  // where the value's first token is in the parsed tokens
};

struct Parsed {
  std::vector<Pair> pairs;  // the context, in order
  std::vector<std::vector<int64_t>> noise;
  Pair probe;  // after the prefix; with multi_query, the final pair
};

// Splits the length + 1 tokens (inputs, then the last target) into runs. The multi-query layout
// has no copy prefix (its pad is V − 1); its probe is the last pair.
Parsed parse(const std::vector<int64_t>& tokens, const Setting& s) {
  const int64_t specials = s.multi_query ? 1 : 2;
  const int64_t plain = s.vocab - specials - s.noise_vocab, keys = plain / 2;
  const auto kind = [&](int64_t token) {
    if (!s.multi_query && token == s.vocab - 1) return Kind::prefix;
    if (token == s.vocab - specials) return Kind::pad;
    if (token >= plain) return Kind::noise;
    return token < keys ? Kind::key : Kind::value;
  };
  size_t i = 0;
  while (i < tokens.size() && kind(tokens[i]) == Kind::pad) ++i;
  const auto run = [&](Kind k) {
    std::vector<int64_t> out;
    while (i < tokens.size() && kind(tokens[i]) == k) out.push_back(tokens[i++]);
    return out;
  };
  Parsed p;
  while (i < tokens.size() && kind(tokens[i]) != Kind::prefix) {
    const Kind first = kind(tokens[i]);
    REQUIRE((first == Kind::key || first == Kind::noise));  // no pad or lone value inside
    if (first == Kind::noise) {
      p.noise.push_back(run(Kind::noise));
      continue;
    }
    Pair pair;
    pair.key = run(Kind::key);
    pair.value_at = i;
    pair.value = run(Kind::value);
    REQUIRE(!pair.value.empty());
    p.pairs.push_back(std::move(pair));
  }
  if (s.multi_query) {
    REQUIRE(!p.pairs.empty());
    p.probe = p.pairs.back();
    p.pairs.pop_back();
    return p;
  }
  REQUIRE(i < tokens.size());  // the prefix
  ++i;
  p.probe.key = run(Kind::key);
  p.probe.value_at = i;
  p.probe.value = run(Kind::value);
  REQUIRE(i == tokens.size());
  return p;
}

// The probe's key and value tokens (they end the sequence after the prefix).
int64_t answer_size(const Parsed& p) {
  return static_cast<int64_t>(p.probe.key.size() + p.probe.value.size());
}

bool distinct(const std::vector<int64_t>& tokens) {
  return std::set<int64_t>(tokens.begin(), tokens.end()).size() == tokens.size();
}

}  // namespace

TEST_CASE("fuzzy_recall: the layout, bindings, probe, targets and mask, read back by a parser") {
  for (const Setting& s : std::vector<Setting>{{16, 3, 3, 0, 0.0, false},
                                               {16, 3, 3, 0, 0.0, true},
                                               {40, 2, 4, 12, 0.3, false},
                                               {12, 2, 2, 0, 0.0, true}}) {
    INFO("vocab " << s.vocab << " k " << s.key_size << " v " << s.value_size << " noise " << s.noise
                  << " test " << s.test);
    const auto task = make(s);
    CHECK(task->vocab_size() == s.vocab);
    CHECK(task->num_classes() == s.vocab);
    for (const int64_t length : {int64_t{64}, int64_t{128}}) {
      const HostBatch batch = sample_host_batch(*task, 150, {length, length}, 9);
      std::map<int64_t, int64_t> key_sizes, probe_key_sizes;
      int64_t noise_runs = 0, noise_tokens = 0, context_tokens = 0;
      for (int64_t n = 0; n < batch.batch; ++n) {
        const auto x = row(batch.inputs, n, length);
        const auto y = row(batch.targets, n, length);
        for (int64_t t = 0; t + 1 < length; ++t) REQUIRE(y[t] == x[t + 1]);
        std::vector<int64_t> tokens = x;
        tokens.push_back(y[length - 1]);
        const Parsed p = parse(tokens, s);
        std::map<std::vector<int64_t>, std::vector<int64_t>> bound;
        for (const auto& [k, v, at] : p.pairs) {
          REQUIRE(distinct(k));
          REQUIRE(distinct(v));
          REQUIRE((static_cast<int64_t>(k.size()) <= s.key_size && !k.empty()));
          if (s.test) REQUIRE(static_cast<int64_t>(k.size()) == s.key_size);
          REQUIRE(static_cast<int64_t>(v.size()) <= s.value_size);
          if (bound.count(k)) REQUIRE(bound[k] == v);
          bound[k] = v;
          ++key_sizes[static_cast<int64_t>(k.size())];
        }
        noise_runs += static_cast<int64_t>(p.noise.size());
        for (const auto& noise : p.noise) noise_tokens += static_cast<int64_t>(noise.size());
        context_tokens += static_cast<int64_t>(tokens.size()) - 2 * answer_size(p) - 1;
        // The question: its key was in the context, bound to the value it ends with.
        REQUIRE(bound.count(p.probe.key) == 1);
        REQUIRE(bound[p.probe.key] == p.probe.value);
        ++probe_key_sizes[static_cast<int64_t>(p.probe.key.size())];
        const int64_t answer = static_cast<int64_t>(p.probe.value.size());
        for (int64_t t = 0; t < length; ++t)
          REQUIRE(batch.mask[n * length + t] == (!s.test || t >= length - answer ? 1 : 0));
      }
      // Every motif size is drawn (only the longest key in test instances).
      for (int64_t size = s.test ? s.key_size : 1; size <= s.key_size; ++size) {
        CHECK(key_sizes[size] > 0);
        CHECK(probe_key_sizes[size] > 0);
      }
      // Noise only when asked for; then a slot is noise with chance `noise`, and noise slots
      // are as long as pairs, so about that share of the context is noise (adjacent noise
      // slots read as one run, so runs are not counted).
      if (s.noise == 0) CHECK(noise_runs == 0);
      if (s.noise > 0)
        CHECK(static_cast<double>(noise_tokens) / static_cast<double>(context_tokens) ==
              Approx(s.noise).margin(0.06));
    }
  }
}

TEST_CASE("fuzzy_recall: the documented example") {
  const auto task = make({12, 2, 2, 0, 0.0, true});
  CHECK(show_examples(*task, 16, 1, 1) ==
        "10 10 10 10 0 4 9 5 4 1 9 8 11 4 1 9 -> ..............98\n");
}

TEST_CASE("fuzzy_recall: impossible options and lengths are refused by name") {
  CHECK_NOTHROW(make({8, 3, 3, 0, 0.0, false}));  // 3 key and 3 value tokens: just enough
  CHECK_THROWS_WITH(make({8, 4, 1, 0, 0.0, false}), Contains("'key_size' is 4, more than the 3"));
  CHECK_THROWS_WITH(make({8, 1, 4, 0, 0.0, false}), Contains("'value_size' is 4, more than the 3"));
  CHECK_THROWS_WITH(make({16, 3, 3, 0, 0.2, false}), Contains("'noise' above 0 needs noise"));
  CHECK_THROWS_WITH(make({16, 9, 3, 0, 0.0, false}), Contains("'key_size'"));
  const auto task = make({16, 3, 3, 0, 0.0, false});
  CHECK_THROWS_WITH(task->check_length(12),
                    Contains("at least 2 (key_size + value_size) + 1 = 13"));
  CHECK_NOTHROW(task->check_length(13));
}

TEST_CASE("fuzzy_recall with multi_query: no prefix, the final pair asked, every recall scored") {
  for (const bool test : {false, true}) {
    for (const double noise : {0.0, 0.3}) {
      INFO("test " << test << " noise " << noise);
      // keys 0 .. 5, values 6 .. 11 (no noise) or 6 .. 11 then noise 12 .. 15; the pad 16.
      const Setting s{17, 3, 3, noise > 0 ? 4 : 0, noise, test, true};
      const int64_t length = 96;
      const HostBatch batch = sample_host_batch(*make(s), 150, {length, length}, 8);
      int64_t recalls = 0;
      for (int64_t i = 0; i < batch.batch; ++i) {
        const auto x = row(batch.inputs, i, length);
        const auto y = row(batch.targets, i, length);
        std::vector<int64_t> tokens(x.begin(), x.end());
        tokens.push_back(y[length - 1]);
        for (int64_t t = 0; t + 1 < length; ++t) REQUIRE(y[t] == x[t + 1]);
        const Parsed p = parse(tokens, s);
        std::map<std::vector<int64_t>, std::vector<int64_t>> bound;
        std::vector<bool> expected(tokens.size(), false);  // scored when it is a target
        const auto recall = [&](const Pair& pair) {        // true when its key appeared before
          if (test) REQUIRE(pair.key.size() == 3);
          const bool seen = bound.count(pair.key) == 1;
          if (seen) REQUIRE(bound[pair.key] == pair.value);
          for (size_t u = 0; seen && u < pair.value.size(); ++u) expected[pair.value_at + u] = true;
          bound[pair.key] = pair.value;
          return seen;
        };
        for (const Pair& pair : p.pairs) recall(pair);
        REQUIRE(recall(p.probe));  // the final pair's key appeared before: the question
        for (int64_t t = 0; t < length; ++t) {
          const bool scored = batch.mask[i * length + t] == 1;
          REQUIRE(scored == (!test || expected[static_cast<size_t>(t + 1)]));
          recalls += scored;
        }
      }
      if (test) CHECK(recalls > batch.batch);  // more than the final answer, on average
    }
  }
  const auto task = build_task("fuzzy_recall", [](Options& o) { o.set("multi_query", {true}); });
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 2, {11, 11}, 1),
                      Contains("length must be at least 2 (key_size + value_size) = 12 (the probe "
                               "pair twice), got 11"));
  CHECK_NOTHROW(sample_host_batch(*task, 2, {12, 12}, 1));
}
