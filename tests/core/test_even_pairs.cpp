#include <catch2/catch.hpp>

#include <functional>

#include "runtime/tasks/even_pairs.h"
#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::row;

namespace {

std::shared_ptr<Task> even_pairs(std::function<void(Options&)> configure) {
  return test::build_task("even_pairs", configure);
}

// The oracle: the definition itself, counting the "01" and "10" pairs of each prefix.
std::vector<int64_t> even_pair_counts(const std::vector<int64_t>& bits) {
  std::vector<int64_t> out;
  for (size_t t = 0; t < bits.size(); ++t) {
    int64_t pairs = 0;
    for (size_t i = 1; i <= t; ++i) pairs += bits[i - 1] != bits[i];
    out.push_back(pairs % 2 == 0 ? 1 : 0);
  }
  return out;
}

}  // namespace

TEST_CASE("the even pairs oracle reproduces the documented example 0110100 -> 1001011") {
  CHECK(even_pair_counts({0, 1, 1, 0, 1, 0, 0}) == std::vector<int64_t>{1, 0, 0, 1, 0, 1, 1});
}

TEST_CASE("even pairs targets match the oracle and every position is scored") {
  auto task = even_pairs([](Options&) {});
  CHECK(task->vocab_size() == 2);
  CHECK(task->num_classes() == 2);
  const HostBatch batch = sample_host_batch(*task, 100, {1, 60}, 6);
  double ones = 0;
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto inputs = row(batch.inputs, i, batch.length);
    for (int64_t x : inputs) {
      REQUIRE((x == 0 || x == 1));
      ones += static_cast<double>(x);
    }
    REQUIRE(row(batch.targets, i, batch.length) == even_pair_counts(inputs));
  }
  for (uint8_t m : batch.mask) REQUIRE(m == 1);
  CHECK(ones / static_cast<double>(batch.inputs.size()) == Approx(0.5).margin(0.05));
}

TEST_CASE("even pairs takes no options and rejects unknown ones") {
  REQUIRE_THROWS_WITH(even_pairs([](Options& o) { o.set("p_one", {0.5}); }),
                      Contains("unknown option 'p_one'"));
}
