// MAD's tasks (Poli et al.; athms/mad-lab): in-context recall (and its noisy variant),
// selective copying, memorization. Each batch is read back by an oracle that parses the
// documented layout on its own.

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>

#include "runtime/tasks/memorization.h"
#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::build_task;
using memscript::test::row;

TEST_CASE("in_context_recall: next-token targets, the probe's value last, bindings kept") {
  for (const auto& [vocab, noise_vocab, noise] :
       std::vector<std::tuple<int64_t, int64_t, double>>{{16, 0, 0.0}, {32, 16, 0.2}, {8, 0, 0}}) {
    INFO("vocab " << vocab << " noise_vocab " << noise_vocab << " noise " << noise);
    const auto task = build_task("in_context_recall", [&](Options& o) {
      o.set("vocab", {vocab});
      o.set("noise_vocab", {noise_vocab});
      o.set("noise", {noise});
    });
    CHECK(task->vocab_size() == vocab);
    CHECK(task->num_classes() == vocab);
    const int64_t plain = vocab - 1 - noise_vocab, keys = plain / 2;
    const int64_t length = 64;
    const HostBatch batch = sample_host_batch(*task, 200, {length, length}, 4);
    int64_t noise_slots = 0, slots = 0;
    for (int64_t i = 0; i < batch.batch; ++i) {
      const auto x = row(batch.inputs, i, length);
      const auto y = row(batch.targets, i, length);
      std::map<int64_t, int64_t> bound;
      int64_t pairs = 0;
      for (int64_t s = 0; s + 2 < length; s += 2, ++slots) {
        if (x[s] >= plain) {  // a noise slot: both tokens noise
          REQUIRE((x[s] < vocab - 1 && x[s + 1] >= plain && x[s + 1] < vocab - 1));
          ++noise_slots;
          continue;
        }
        REQUIRE(x[s] < keys);
        REQUIRE((x[s + 1] >= keys && x[s + 1] < plain));
        if (bound.count(x[s])) REQUIRE(bound[x[s]] == x[s + 1]);
        bound[x[s]] = x[s + 1];
        ++pairs;
      }
      REQUIRE(pairs >= 1);
      REQUIRE(x[length - 2] == vocab - 1);  // the copy prefix
      REQUIRE(bound.count(x[length - 1]) == 1);
      for (int64_t t = 0; t + 1 < length; ++t) REQUIRE(y[t] == x[t + 1]);
      REQUIRE(y[length - 1] == bound[x[length - 1]]);
      for (int64_t t = 0; t < length; ++t) REQUIRE(batch.mask[i * length + t] == 1);
    }
    // One slot in each sequence is always a pair; the others are noise with chance `noise`.
    const double expected = noise * static_cast<double>(slots - batch.batch);
    if (noise == 0) CHECK(noise_slots == 0);
    if (noise > 0) CHECK(static_cast<double>(noise_slots) == Approx(expected).epsilon(0.08));
  }
}

TEST_CASE("in_context_recall checks its options and lengths") {
  const auto task = build_task("in_context_recall", {});
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 2, {7, 7}, 1),
                      Contains("length must be even and at least 4"));
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 2, {2, 2}, 1), Contains("got 2"));
  REQUIRE_THROWS_WITH(build_task("in_context_recall", [](Options& o) { o.set("noise", {0.2}); }),
                      Contains("'noise' above 0 needs noise tokens: set noise_vocab"));
  REQUIRE_THROWS_WITH(
      build_task("in_context_recall", [](Options& o) { o.set("noise_vocab", {int64_t{14}}); }),
      Contains("'noise_vocab' must be"));
  REQUIRE_THROWS_WITH(build_task("in_context_recall", [](Options& o) { o.set("noise", {1.0}); }),
                      Contains("'noise' must be in"));
}

TEST_CASE("in_context_recall with multi_query: MAD's benchmark layout, scored where recalled") {
  for (const auto& [vocab, noise_vocab, noise] :
       std::vector<std::tuple<int64_t, int64_t, double>>{{16, 0, 0.0}, {32, 16, 0.2}}) {
    for (const bool test : {false, true}) {
      INFO("vocab " << vocab << " noise " << noise << " test " << test);
      const auto task = build_task("in_context_recall", [&](Options& o) {
        o.set("vocab", {vocab});
        o.set("noise_vocab", {noise_vocab});
        o.set("noise", {noise});
        o.set("multi_query", {true});
        o.set("test", {test});
      });
      const int64_t plain = vocab - noise_vocab, keys = plain / 2;
      const int64_t length = 63;  // 32 pairs, the last token only a target
      const HostBatch batch = sample_host_batch(*task, 200, {length, length}, 6);
      int64_t recalled = 0;
      for (int64_t i = 0; i < batch.batch; ++i) {
        const auto x = row(batch.inputs, i, length);
        const auto y = row(batch.targets, i, length);
        std::vector<int64_t> tokens(x.begin(), x.end());
        tokens.push_back(y[length - 1]);  // the whole sequence the model reads and predicts
        for (int64_t t = 0; t + 1 < length; ++t) REQUIRE(y[t] == x[t + 1]);
        std::map<int64_t, int64_t> bound;
        for (int64_t s = 0; s < length + 1; s += 2) {
          const bool is_noise = tokens[s] >= plain;
          if (is_noise) {
            REQUIRE((s + 2 < length + 1 && tokens[s + 1] >= plain && tokens[s + 1] < vocab));
          } else {
            REQUIRE(tokens[s] < keys);
            REQUIRE((tokens[s + 1] >= keys && tokens[s + 1] < plain));
          }
          const bool seen = !is_noise && bound.count(tokens[s]) == 1;
          if (seen) REQUIRE(bound[tokens[s]] == tokens[s + 1]);
          if (s + 2 == length + 1) REQUIRE(seen);  // the final pair asks a key that appeared
          if (!is_noise) bound[tokens[s]] = tokens[s + 1];
          // Scored: everything in training; at test the values of keys seen before, alone.
          for (int64_t u = s; u < s + 2; ++u) {
            if (u == 0) continue;
            const bool scored = batch.mask[i * length + u - 1] == 1;
            REQUIRE(scored == (!test || (u == s + 1 && seen)));
            recalled += scored && u == s + 1 && seen;
          }
        }
      }
      if (test) CHECK(recalled > batch.batch * 3);  // several recalls a sequence, not one
    }
  }
  const auto task =
      build_task("in_context_recall", [](Options& o) { o.set("multi_query", {true}); });
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 2, {8, 8}, 1),
                      Contains("with multi_query, length must be odd and at least 3"));
  const HostBatch one = sample_host_batch(*task, 1, {3, 3}, 1);  // a pair, then the final pair
  CHECK(one.inputs[0] == one.inputs[2]);
  CHECK(one.targets[2] == one.inputs[1]);
}

TEST_CASE("in_context_recall with test = true alone scores the single probe's answer") {
  const auto task = build_task("in_context_recall", [](Options& o) { o.set("test", {true}); });
  const HostBatch batch = sample_host_batch(*task, 20, {16, 16}, 3);
  for (int64_t i = 0; i < 20 * 16; ++i) CHECK(batch.mask[i] == (i % 16 == 15 ? 1 : 0));
}

TEST_CASE("selective_copying: the content tokens among blanks, copied after the copy token") {
  const int64_t vocab = 16, copies = 16, length = 64;
  const auto task = build_task("selective_copying", {});
  CHECK(task->num_classes() == vocab - 2);
  const HostBatch batch = sample_host_batch(*task, 300, {length, length}, 2);
  std::vector<double> blanks_before(copies, 0);
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto x = row(batch.inputs, i, length);
    const auto y = row(batch.targets, i, length);
    const int64_t copy_at = length - copies - 1;
    REQUIRE(x[copy_at] == vocab - 1);
    std::vector<int64_t> content;
    int64_t run = 0;
    for (int64_t t = 0; t < copy_at; ++t) {
      REQUIRE(x[t] < vocab - 1);
      if (x[t] == vocab - 2) {
        ++run;
        continue;
      }
      blanks_before[content.size()] += static_cast<double>(run) / batch.batch;
      run = 0;
      content.push_back(x[t]);
    }
    REQUIRE(static_cast<int64_t>(content.size()) == copies);
    REQUIRE(x[copy_at - 1] != vocab - 2);  // MAD never puts a blank after the last token
    for (int64_t t = 0; t < length; ++t) {
      const bool answer = t > copy_at;
      REQUIRE(batch.mask[i * length + t] == (answer ? 1 : 0));
      if (answer) {
        REQUIRE(x[t] == vocab - 2);
        REQUIRE(y[t] == content[static_cast<size_t>(t - copy_at - 1)]);
      }
    }
  }
  // The 31 blanks fall in front of each token alike: 31 / 16 on average.
  for (double mean : blanks_before) CHECK(mean == Approx(31.0 / 16).epsilon(0.2));
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 2, {33, 33}, 1),
                      Contains("length must be above 2 * copies + 1 = 33, got 33"));
  REQUIRE_THROWS_WITH(
      build_task("selective_copying", [](Options& o) { o.set("vocab", {int64_t{2}}); }),
      Contains("'vocab' must be"));
}

TEST_CASE("memorization: one fixed one-to-one map, scored at the insert tokens") {
  const auto task = build_task("memorization", {});
  CHECK(task->vocab_size() == 256);
  CHECK(task->num_classes() == 128);  // n = 255: 127 keys, 128 values
  std::map<int64_t, int64_t> seen;
  for (const uint64_t seed : {1, 2}) {
    const HostBatch batch = sample_host_batch(*task, 50, {32, 32}, seed);
    for (size_t c = 0; c < batch.inputs.size(); ++c) {
      if (c % 2 == 0) {
        REQUIRE(batch.inputs[c] < 127);
        REQUIRE(batch.mask[c] == 0);
        continue;
      }
      REQUIRE(batch.inputs[c] == 255);
      REQUIRE(batch.mask[c] == 1);
      const int64_t key = batch.inputs[c - 1], value = batch.targets[c];
      if (seen.count(key)) REQUIRE(seen[key] == value);
      seen[key] = value;
    }
  }
  std::set<int64_t> values;
  for (const auto& [key, value] : seen) values.insert(value);
  CHECK(values.size() == seen.size());  // one-to-one
  CHECK(seen.size() > 120);             // 1600 uniform draws reach nearly all 127 keys
  const auto other =
      build_task("memorization", [](Options& o) { o.set("map_seed", {int64_t{7}}); });
  int same = 0;
  for (int64_t k = 0; k < 127; ++k)
    same += dynamic_cast<const MemorizationTask&>(*other).value_of(k) ==
            dynamic_cast<const MemorizationTask&>(*task).value_of(k);
  CHECK(same < 10);
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 2, {7, 7}, 1), Contains("length must be even"));
}
