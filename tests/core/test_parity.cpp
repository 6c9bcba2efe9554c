#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "runtime/tasks/parity.h"
#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::row;

namespace {

std::shared_ptr<Task> parity(std::function<void(Options&)> configure) {
  return test::build_task("parity", configure);
}

// The oracle: the parity of each prefix, recounted from scratch (quadratic on purpose, so it
// shares nothing with the generator's running XOR).
std::vector<int64_t> prefix_parity(const std::vector<int64_t>& bits) {
  std::vector<int64_t> out;
  for (size_t t = 0; t < bits.size(); ++t) {
    int64_t ones = 0;
    for (size_t i = 0; i <= t; ++i) ones += bits[i] == 1;
    out.push_back(ones % 2);
  }
  return out;
}

}  // namespace

TEST_CASE("the parity oracle reproduces the documented example 0011010 -> 0010011") {
  CHECK(prefix_parity({0, 0, 1, 1, 0, 1, 0}) == std::vector<int64_t>{0, 0, 1, 0, 0, 1, 1});
}

TEST_CASE("parity targets match the oracle and every position is scored") {
  auto task = parity([](Options& o) { o.set("p_one", {0.5}); });
  const HostBatch batch = sample_host_batch(*task, 64, {1, 40}, 7);
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto inputs = row(batch.inputs, i, batch.length);
    for (int64_t bit : inputs) REQUIRE((bit == 0 || bit == 1));
    REQUIRE(row(batch.targets, i, batch.length) == prefix_parity(inputs));
  }
  for (uint8_t m : batch.mask) REQUIRE(m == 1);
}

TEST_CASE("parity with ones = n has exactly n ones, placed all over the sequence") {
  auto task = parity([](Options& o) { o.set("ones", {int64_t{12}}); });
  const HostBatch batch = sample_host_batch(*task, 200, {32, 32}, 3);
  std::vector<int64_t> hits(32);
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto inputs = row(batch.inputs, i, 32);
    int64_t ones = 0;
    for (int64_t t = 0; t < 32; ++t) {
      ones += inputs[t];
      hits[t] += inputs[t];
    }
    REQUIRE(ones == 12);
    REQUIRE(row(batch.targets, i, 32) == prefix_parity(inputs));
  }
  // Uniform placement: each position holds a one with probability 12/32 (75 of 200 expected).
  for (int64_t count : hits) CHECK((count > 40 && count < 115));
}

TEST_CASE("parity with ones = {min, max} stays inside the range and uses all of it") {
  auto range = std::make_shared<Options>("ones");
  range->set("min", {int64_t{2}});
  range->set("max", {int64_t{5}});
  auto task = parity([&](Options& o) { o.set("ones", {range}); });
  const HostBatch batch = sample_host_batch(*task, 400, {16, 16}, 11);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < batch.batch; ++i) {
    int64_t ones = 0;
    for (int64_t bit : row(batch.inputs, i, 16)) ones += bit;
    REQUIRE((ones >= 2 && ones <= 5));
    seen.insert(ones);
  }
  CHECK(seen == std::set<int64_t>{2, 3, 4, 5});
}

TEST_CASE("parity p_one sets the share of ones") {
  auto task = parity([](Options& o) { o.set("p_one", {0.2}); });
  const HostBatch batch = sample_host_batch(*task, 100, {100, 100}, 5);
  double ones = 0;
  for (int64_t bit : batch.inputs) ones += static_cast<double>(bit);
  CHECK(ones / static_cast<double>(batch.inputs.size()) == Approx(0.2).margin(0.02));
}

TEST_CASE("parity rejects impossible options, naming key and value") {
  REQUIRE_THROWS_WITH(parity([](Options& o) { o.set("p_one", {1.5}); }),
                      Contains("'p_one' must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(parity([](Options& o) { o.set("ones", {int64_t{-1}}); }),
                      Contains("'ones' must be >= 0, got -1"));
  REQUIRE_THROWS_WITH(parity([](Options& o) {
                        o.set("ones", {int64_t{3}});
                        o.set("p_one", {0.5});
                      }),
                      Contains("exclude each other"));
  auto range = std::make_shared<Options>("ones");
  range->set("min", {int64_t{5}});
  range->set("max", {int64_t{2}});
  REQUIRE_THROWS_WITH(parity([&](Options& o) { o.set("ones", {range}); }),
                      Contains("min = 5 greater than max = 2"));
  REQUIRE_THROWS_WITH(parity([](Options& o) { o.set("onez", {int64_t{3}}); }),
                      Contains("unknown option 'onez'"));
}

TEST_CASE("parity refuses lengths shorter than its number of ones, and length 0") {
  auto task = parity([](Options& o) { o.set("ones", {int64_t{12}}); });
  REQUIRE_THROWS_WITH(sample_host_batch(*task, 4, {8, 8}, 1),
                      Contains("ones = 12 is more than the sequence length 8"));
  REQUIRE_THROWS_WITH(task->check_length(0), Contains("length must be >= 1, got 0"));
}

TEST_CASE("an unknown task name lists the tasks") {
  Options options("ms.task");
  REQUIRE_THROWS_WITH(make_task("parityy", options),
                      Contains("unknown task 'parityy'; tasks: ") && Contains("parity"));
}
