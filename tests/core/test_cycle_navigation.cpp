#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "runtime/tasks/cycle_navigation.h"
#include "task_support.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::row;

namespace {

std::shared_ptr<Task> cycle(std::function<void(Options&)> configure) {
  return test::build_task("cycle_navigation", configure);
}

// The oracle: for each prefix, count forward and backward moves from scratch and reduce the
// signed difference to 0..4.
std::vector<int64_t> positions(const std::vector<int64_t>& moves) {
  std::vector<int64_t> out;
  for (size_t t = 0; t < moves.size(); ++t) {
    int64_t forward = 0;
    int64_t back = 0;
    for (size_t i = 0; i <= t; ++i) {
      forward += moves[i] == 1;
      back += moves[i] == 2;
    }
    out.push_back(((forward - back) % 5 + 5) % 5);
  }
  return out;
}

}  // namespace

TEST_CASE("the cycle navigation oracle reproduces the documented example 112022 -> 121104") {
  CHECK(positions({1, 1, 2, 0, 2, 2}) == std::vector<int64_t>{1, 2, 1, 1, 0, 4});
}

TEST_CASE("cycle navigation targets match the oracle and every position is scored") {
  auto task = cycle([](Options&) {});
  CHECK(task->vocab_size() == 3);
  CHECK(task->num_classes() == 5);
  const HostBatch batch = sample_host_batch(*task, 100, {1, 60}, 4);
  std::set<int64_t> moves;
  std::set<int64_t> reached;
  for (int64_t i = 0; i < batch.batch; ++i) {
    const auto inputs = row(batch.inputs, i, batch.length);
    for (int64_t x : inputs) REQUIRE((x >= 0 && x <= 2));
    moves.insert(inputs.begin(), inputs.end());
    const auto targets = row(batch.targets, i, batch.length);
    REQUIRE(targets == positions(inputs));
    reached.insert(targets.begin(), targets.end());
  }
  for (uint8_t m : batch.mask) REQUIRE(m == 1);
  CHECK(moves == std::set<int64_t>{0, 1, 2});
  CHECK(reached == std::set<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("cycle navigation takes no options and rejects unknown ones") {
  REQUIRE_THROWS_WITH(cycle([](Options& o) { o.set("positions", {int64_t{7}}); }),
                      Contains("unknown option 'positions'"));
  auto task = cycle([](Options&) {});
  REQUIRE_THROWS_WITH(task->check_length(0), Contains("length must be >= 1, got 0"));
}
