#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// Bit parity: inputs in {0, 1}; target_t = (x_1 + ... + x_t) mod 2 (1 = odd); every position
// is scored. Example: 0011010 -> 0010011.
//   p_one = p          each bit is 1 with probability p (default 0.5)
//   ones = n           exactly n ones, placed uniformly at random
//   ones = {min, max}  a number of ones drawn uniformly from [min, max], then placed uniformly
struct ParitySpec {
  enum class Mode { Bernoulli, ExactOnes };
  Mode mode = Mode::Bernoulli;
  double p_one = 0.5;
  int64_t ones_min = 0;
  int64_t ones_max = 0;
};

class ParityTask : public Task {
 public:
  explicit ParityTask(ParitySpec spec);

  std::string name() const override { return "parity"; }
  int64_t vocab_size() const override { return 2; }
  int64_t num_classes() const override { return 2; }
  nlohmann::json config() const override;
  void check_length(int64_t length) const override;
  void generate(Rng& rng, SequenceView sequence) const override;

 private:
  void place_ones(Rng& rng, SequenceView sequence) const;
  ParitySpec spec_;
};

std::shared_ptr<Task> make_parity_task(Options& options);

}  // namespace memscript
