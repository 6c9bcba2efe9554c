#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// Even pairs: uniform bits; target_t = 1 iff x_1..x_t holds an even number of adjacent pairs
// "01" and "10", which is the case exactly when x_t == x_1; every position is scored;
// vocabulary 2, classes 2. Example: 0110100 -> 1001011. No options.
class EvenPairsTask : public Task {
 public:
  std::string name() const override { return "even_pairs"; }
  int64_t vocab_size() const override { return 2; }
  int64_t num_classes() const override { return 2; }
  nlohmann::json config() const override;
  void generate(Rng& rng, SequenceView sequence) const override;
};

std::shared_ptr<Task> make_even_pairs_task(Options& options);

}  // namespace memscript
