#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// MAD's in-context recall and noisy in-context recall (Poli et al., "Mechanistic Design and
// Scaling of Hybrid Architectures"; athms/mad-lab). A run of slots, each a key-value pair (a key
// drawn uniformly, bound to a fresh uniform value the first time it appears and to the same
// value after) or, with probability `noise`, two noise tokens; one slot, drawn uniformly, is
// always a pair. The target at t is the next token (MAD's training objective, every position
// scored).
//   Single query (default): L/2 − 1 slots, the copy prefix, then a probe key drawn uniformly
//   from the keys that appeared; the last target is the probe's value. `test = true` (or
//   score = "last") scores that answer alone.
//   multi_query = true (MAD's benchmark setting): no copy prefix; (L + 1)/2 − 1 slots and a final
//   pair, a key that appeared with its value, make L + 1 tokens, of which the model reads the
//   first L and predicts the last L (mad-lab's inputs[:-1], inputs[1:]). `test = true` scores
//   every value whose key appeared in an earlier pair, the final one included (MAD's test).
//   vocab = V            the vocabulary, tokens and classes (default 16): keys 0 .. n/2 − 1,
//                        values n/2 .. n − 1, noise tokens n .. n + N − 1, and (single query)
//                        the copy prefix V − 1; n = V − N, less 1 for the prefix
//   noise_vocab = N      noise tokens (default 0; MAD's noisy recall: vocab 32, noise_vocab 16)
//   noise = f            the chance a slot is noise (default 0, below 1)
//   multi_query = false, test = false   above
// The length is even and at least 4 (single query), odd and at least 3 (multi_query: MAD's
// seq_len 128 is length 127). Examples, V = 8: single query (keys 0 1 2, values 3 .. 6, prefix 7)
//   0 4 1 3 0 4 7 1 -> 4 1 3 0 4 7 1 3
// multi_query, test (keys 0 .. 3, values 4 .. 7; the pairs 0 5, 1 4, 0 5 and the final 1 4):
//   0 5 1 4 0 5 1 -> . . . . 5 . 4
class InContextRecallTask : public Task {
 public:
  InContextRecallTask(int64_t vocab, int64_t noise_vocab, double noise, bool multi_query,
                      bool test);

  std::string name() const override { return "in_context_recall"; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t num_classes() const override { return vocab_; }
  nlohmann::json config() const override;
  void check_length(int64_t length) const override;
  void generate(Rng& rng, SequenceView sequence) const override;

 private:
  int64_t vocab_, noise_vocab_;
  double noise_;
  bool multi_query_, test_;
  int64_t keys_, values_;  // keys 0 .. keys_ − 1, values keys_ .. keys_ + values_ − 1
};

std::shared_ptr<Task> make_in_context_recall_task(Options& options);

}  // namespace memscript
