#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "runtime/tasks/dyck.h"
#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::row;

namespace {

std::shared_ptr<Task> dyck(std::function<void(Options&)> configure) {
  return test::build_task("dyck", configure);
}

// The oracle: a recursive-descent parser of the grammar W -> (open_i W close_i)* with the
// nesting bounded by max_depth, run from scratch on every prefix (quadratic on purpose; it
// shares nothing with the generator's stack). A prefix is labelled 1 iff it parses whole.
class Parser {
 public:
  Parser(const std::vector<int64_t>& tokens, size_t end, int64_t kinds, int64_t max_depth)
      : tokens_(tokens), end_(end), kinds_(kinds), max_depth_(max_depth) {}

  bool complete() {
    const std::optional<size_t> stop = word(0, 0);
    return stop && *stop == end_;
  }

 private:
  // Parses a (possibly empty) sequence of bracketed words from `at`; returns where it stopped,
  // or nothing on a bracket that cannot be closed as the grammar requires.
  std::optional<size_t> word(size_t at, int64_t depth) {
    while (at < end_ && tokens_[at] < kinds_) {
      if (depth + 1 > max_depth_) return std::nullopt;
      const std::optional<size_t> inner = word(at + 1, depth + 1);
      if (!inner || *inner >= end_ || tokens_[*inner] != tokens_[at] + kinds_) return std::nullopt;
      at = *inner + 1;
    }
    return at;
  }

  const std::vector<int64_t>& tokens_;
  size_t end_;
  int64_t kinds_;
  int64_t max_depth_;
};

std::vector<int64_t> oracle(const std::vector<int64_t>& tokens, int64_t kinds, int64_t max_depth) {
  std::vector<int64_t> out;
  for (size_t t = 1; t <= tokens.size(); ++t) {
    out.push_back(Parser(tokens, t, kinds, max_depth).complete() ? 1 : 0);
  }
  return out;
}

// Bracket glyphs: ( [ { open kinds 0, 1, 2 and ) ] } close them.
std::vector<int64_t> brackets(const std::string& text) {
  const std::string glyphs = "([{)]}";
  std::vector<int64_t> out;
  for (char c : text) out.push_back(static_cast<int64_t>(glyphs.find(c)));
  return out;
}

int64_t max_depth_of(const std::vector<int64_t>& tokens, int64_t kinds) {
  int64_t depth = 0;
  int64_t deepest = 0;
  for (int64_t token : tokens) {
    depth += token < kinds ? 1 : -1;
    deepest = std::max(deepest, depth);
  }
  return deepest;
}

}  // namespace

TEST_CASE("dyck labels the documented example {[]()}[]() -> 0000010101") {
  const std::vector<int64_t> tokens = brackets("{[]()}[]()");
  const std::vector<int64_t> expected = {0, 0, 0, 0, 0, 1, 0, 1, 0, 1};
  CHECK(oracle(tokens, 3, 6) == expected);

  DyckTask task({.pairs = 3, .max_depth = 6, .negative_share = 0.5});
  std::vector<int64_t> targets(tokens.size());
  std::unique_ptr<bool[]> mask(new bool[tokens.size()]());
  std::vector<int64_t> inputs = tokens;
  task.label({static_cast<int64_t>(tokens.size()), inputs.data(), targets.data(), mask.get()});
  CHECK(targets == expected);
}

TEST_CASE("the dyck oracle rejects errors, mismatches and words deeper than max_depth") {
  CHECK(oracle(brackets(")()"), 3, 6) == std::vector<int64_t>{0, 0, 0});
  CHECK(oracle(brackets("(]()"), 3, 6) == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(oracle(brackets("(())()"), 3, 1) == std::vector<int64_t>{0, 0, 0, 0, 0, 0});
  CHECK(oracle(brackets("(())()"), 3, 2) == std::vector<int64_t>{0, 0, 0, 1, 0, 1});
  CHECK(oracle(brackets("()[)()"), 3, 6) == std::vector<int64_t>{0, 1, 0, 0, 0, 0});
}

TEST_CASE("dyck targets match the recursive-descent oracle and every position is scored") {
  for (int64_t kinds : {1, 2, 3}) {
    for (int64_t depth : {1, 2, 6}) {
      auto task = dyck([&](Options& o) {
        o.set("pairs", {kinds});
        o.set("max_depth", {depth});
      });
      CHECK(task->vocab_size() == 2 * kinds);
      CHECK(task->num_classes() == 2);
      for (int64_t length : {2, 10, 40}) {
        const HostBatch batch = sample_host_batch(*task, 64, {length, length}, 13);
        for (int64_t i = 0; i < batch.batch; ++i) {
          const auto inputs = row(batch.inputs, i, length);
          for (int64_t token : inputs) REQUIRE((token >= 0 && token < 2 * kinds));
          REQUIRE(row(batch.targets, i, length) == oracle(inputs, kinds, depth));
        }
        for (uint8_t m : batch.mask) REQUIRE(m == 1);
      }
    }
  }
}

TEST_CASE("dyck positives never nest deeper than max_depth, reach it, and use every kind") {
  auto task = dyck([](Options& o) {
    o.set("pairs", {int64_t{3}});
    o.set("max_depth", {int64_t{4}});
    o.set("negative_share", {0.0});
  });
  const int64_t length = 32;
  const HostBatch batch = sample_host_batch(*task, 500, {length, length}, 5);
  std::set<int64_t> depths;
  std::set<int64_t> tokens;
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto inputs = row(batch.inputs, i, length);
    REQUIRE(batch.targets[static_cast<size_t>((i + 1) * length - 1)] == 1);
    const int64_t deepest = max_depth_of(inputs, 3);
    REQUIRE((deepest >= 1 && deepest <= 4));
    depths.insert(deepest);
    tokens.insert(inputs.begin(), inputs.end());
  }
  CHECK(depths.count(4) == 1);
  CHECK(tokens == std::set<int64_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("dyck negative_share sets the share of sequences that do not end balanced") {
  for (double share : {0.0, 0.3, 0.5, 1.0}) {
    auto task = dyck([&](Options& o) { o.set("negative_share", {share}); });
    const int64_t length = 24;
    const HostBatch batch = sample_host_batch(*task, 2000, {length, length}, 17);
    double negatives = 0;
    for (int64_t i = 0; i < batch.batch; ++i) {
      negatives += batch.targets[static_cast<size_t>((i + 1) * length - 1)] == 0 ? 1 : 0;
    }
    CHECK(negatives / 2000.0 == Approx(share).margin(0.04));
  }
}

TEST_CASE("dyck negatives keep a balanced prefix and break the word after it") {
  auto task = dyck([](Options& o) { o.set("negative_share", {1.0}); });
  const int64_t length = 16;
  const HostBatch batch = sample_host_batch(*task, 300, {length, length}, 23);
  int64_t with_positive_prefix = 0;
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto targets = row(batch.targets, i, length);
    REQUIRE(targets.back() == 0);
    // Opens and closes stay balanced in number: a negative is a shuffle, not a new word.
    int64_t opens = 0;
    for (int64_t token : row(batch.inputs, i, length)) opens += token < 3 ? 1 : 0;
    REQUIRE(opens == length / 2);
    for (int64_t target : targets) with_positive_prefix += target;
  }
  CHECK(with_positive_prefix > 0);
}

TEST_CASE("dyck rejects impossible options and odd lengths, naming key and value") {
  REQUIRE_THROWS_WITH(dyck([](Options& o) { o.set("pairs", {int64_t{0}}); }),
                      Contains("'pairs' must be >= 1, got 0"));
  REQUIRE_THROWS_WITH(dyck([](Options& o) { o.set("max_depth", {int64_t{0}}); }),
                      Contains("'max_depth' must be >= 1, got 0"));
  REQUIRE_THROWS_WITH(dyck([](Options& o) { o.set("negative_share", {1.5}); }),
                      Contains("'negative_share' must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(dyck([](Options& o) { o.set("negative_share", {-0.1}); }),
                      Contains("'negative_share' must be in [0, 1], got -0.1"));
  REQUIRE_THROWS_WITH(dyck([](Options& o) { o.set("pairs", {2.5}); }),
                      Contains("'pairs' must be an integer, got 2.5"));
  REQUIRE_THROWS_WITH(dyck([](Options& o) { o.set("pair", {int64_t{2}}); }),
                      Contains("unknown option 'pair'"));
  auto task = dyck([](Options&) {});
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 4, {7, 7}, 1),
                      Contains("dyck: length must be even"));
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 4, {7, 7}, 1), Contains("got 7"));
  REQUIRE_THROWS_WITH(task->check_length(0), Contains("length must be >= 1, got 0"));
}
