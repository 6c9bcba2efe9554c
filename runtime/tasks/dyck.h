#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// Dyck(k, D): tokens 0..k-1 open the k bracket kinds, k..2k-1 close them (token k + i closes
// token i); target_t = 1 iff x_1..x_t is a complete balanced word (stack empty) with no error
// so far (no close on an empty stack, no mismatched close, depth never above D); every
// position is scored. Example with 3 kinds: {[]()}[]() -> 0000010101. Lengths must be even.
//   pairs = k           bracket kinds (default 3); vocabulary 2k, 2 classes
//   max_depth = D       the deepest nesting of a positive (default 6)
//   negative_share = s  each sequence is a negative with probability s (default 0.5)
// Positives are random walks within depth D: open when the stack is empty, close when the
// stack is as deep as the remaining length or at depth D, otherwise close with probability
// 1/2; each open draws its kind uniformly. A negative is a positive whose suffix after a
// random balanced position (the empty prefix included) is shuffled until the whole sequence
// is no longer a balanced word of depth <= D, so every negative ends with target 0.
struct DyckSpec {
  int64_t pairs = 3;
  int64_t max_depth = 6;
  double negative_share = 0.5;
};

class DyckTask : public Task {
 public:
  explicit DyckTask(DyckSpec spec);

  std::string name() const override { return "dyck"; }
  int64_t vocab_size() const override { return 2 * spec_.pairs; }
  int64_t num_classes() const override { return 2; }
  nlohmann::json config() const override;
  void check_length(int64_t length) const override;
  void generate(Rng& rng, SequenceView sequence) const override;
  std::string token_text(int64_t token) const override;  // ( [ { < and their closes, k <= 4

  // Writes the labels of `sequence.inputs` into its targets and mask; returns the last target.
  int64_t label(SequenceView sequence) const;

 private:
  void positive(Rng& rng, SequenceView sequence) const;
  void make_negative(Rng& rng, SequenceView sequence) const;
  DyckSpec spec_;
};

std::shared_ptr<Task> make_dyck_task(Options& options);

}  // namespace memscript
