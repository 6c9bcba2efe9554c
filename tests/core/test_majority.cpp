#include <catch2/catch.hpp>

#include <functional>

#include "runtime/tasks/majority.h"
#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::row;

namespace {

std::shared_ptr<Task> majority(std::function<void(Options&)> configure) {
  return test::build_task("majority", configure);
}

// The oracle: ones and zeros of each prefix counted from scratch; a tie is 0.
std::vector<int64_t> prefix_majority(const std::vector<int64_t>& bits) {
  std::vector<int64_t> out;
  for (size_t t = 0; t < bits.size(); ++t) {
    int64_t ones = 0;
    int64_t zeros = 0;
    for (size_t i = 0; i <= t; ++i) (bits[i] == 1 ? ones : zeros) += 1;
    out.push_back(ones > zeros ? 1 : 0);
  }
  return out;
}

}  // namespace

TEST_CASE("the majority oracle reproduces the documented example 0110111 -> 0010111") {
  CHECK(prefix_majority({0, 1, 1, 0, 1, 1, 1}) == std::vector<int64_t>{0, 0, 1, 0, 1, 1, 1});
  CHECK(prefix_majority({1, 0}) == std::vector<int64_t>{1, 0});  // a tie is 0
}

TEST_CASE("majority targets match the oracle and every position is scored") {
  auto task = majority([](Options&) {});
  CHECK(task->vocab_size() == 2);
  CHECK(task->num_classes() == 2);
  const HostBatch batch = sample_host_batch(*task, 100, {1, 60}, 8);
  int64_t ties = 0;
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto inputs = row(batch.inputs, i, batch.length);
    for (int64_t x : inputs) REQUIRE((x == 0 || x == 1));
    const auto targets = row(batch.targets, i, batch.length);
    REQUIRE(targets == prefix_majority(inputs));
    int64_t lead = 0;
    for (int64_t t = 0; t < batch.length; ++t) {
      lead += inputs[t] == 1 ? 1 : -1;
      if (lead == 0) {
        ++ties;
        REQUIRE(targets[t] == 0);
      }
    }
  }
  for (uint8_t m : batch.mask) REQUIRE(m == 1);
  CHECK(ties > 0);
}

TEST_CASE("majority takes no options and rejects unknown ones") {
  REQUIRE_THROWS_WITH(majority([](Options& o) { o.set("p_one", {0.5}); }),
                      Contains("unknown option 'p_one'"));
}
