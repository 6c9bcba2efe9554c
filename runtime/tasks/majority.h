#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// Majority: uniform bits; target_t = 1 iff x_1..x_t holds more ones than zeros (a tie is 0);
// every position is scored; vocabulary 2, classes 2. Example: 0110111 -> 0010111. No options.
class MajorityTask : public Task {
 public:
  std::string name() const override { return "majority"; }
  int64_t vocab_size() const override { return 2; }
  int64_t num_classes() const override { return 2; }
  nlohmann::json config() const override;
  void generate(Rng& rng, SequenceView sequence) const override;
};

std::shared_ptr<Task> make_majority_task(Options& options);

}  // namespace memscript
