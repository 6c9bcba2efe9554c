#include <catch2/catch.hpp>

#include <functional>

#include "runtime/tasks/majority.h"

using namespace memscript;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<Task> majority(std::function<void(Options&)> configure) {
  Options options("ms.task.majority");
  configure(options);
  return make_task("majority", options);
}

std::vector<int64_t> row(const std::vector<int64_t>& flat, int64_t index, int64_t length) {
  return {flat.begin() + index * length, flat.begin() + (index + 1) * length};
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

TEST_CASE("majority batches are deterministic for a seed and differ between seeds") {
  auto task = majority([](Options&) {});
  const HostBatch a = sample_host_batch(*task, 8, {10, 50}, 1);
  const HostBatch b = sample_host_batch(*task, 8, {10, 50}, 1);
  const HostBatch c = sample_host_batch(*task, 8, {10, 50}, 2);
  CHECK(a.length == b.length);
  CHECK(a.inputs == b.inputs);
  CHECK(a.inputs != c.inputs);
}

TEST_CASE("majority takes no options and rejects unknown ones") {
  REQUIRE_THROWS_WITH(majority([](Options& o) { o.set("p_one", {0.5}); }),
                      Contains("unknown option 'p_one'"));
}
