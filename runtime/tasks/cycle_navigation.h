#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// Cycle navigation: an agent on a cycle of 5 positions starts at 0; input 0 = stay, 1 = one
// step forward (+1), 2 = one step back (-1), uniformly drawn; target_t = the position after
// x_1..x_t, i.e. (#1 - #2) mod 5; every position is scored; vocabulary 3, classes 5.
// Example: 112022 -> 121104. No options.
class CycleNavigationTask : public Task {
 public:
  static constexpr int64_t kPositions = 5;

  std::string name() const override { return "cycle_navigation"; }
  int64_t vocab_size() const override { return 3; }
  int64_t num_classes() const override { return kPositions; }
  nlohmann::json config() const override;
  void generate(Rng& rng, SequenceView sequence) const override;
};

std::shared_ptr<Task> make_cycle_navigation_task(Options& options);

}  // namespace memscript
