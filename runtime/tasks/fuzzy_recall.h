#pragma once

#include <memory>

#include "runtime/task.h"

namespace memscript {

// MAD's fuzzy in-context recall (Poli et al., "Mechanistic Design and Scaling of Hybrid
// Architectures"; athms/mad-lab): keys and values are motifs of several distinct tokens. The
// context is a run of key-value pairs — a key of 1 .. key_size key tokens, bound the first time
// it appears to a value of 1 .. value_size value tokens and to the same value after — or, with
// chance `noise`, as many noise tokens; one probe pair is placed at a uniform position; then
// the copy prefix, the probe's key and its value. The sequence is padded in front to the
// length. The target at t is the next token (MAD's training objective, every position scored);
// `test = true` gives MAD's test instances: every key is key_size tokens long and only the
// probe value's tokens at the end are scored.
//   vocab = V          tokens and classes (default 16): keys 0 .. n/2 − 1, values
//                      n/2 .. n − 1 with n = V − 2 − noise_vocab, noise tokens n .. V − 3,
//                      the pad V − 2, the copy prefix V − 1
//   key_size = k       the longest key (default 3, 1 .. 8, at most n/2)
//   value_size = v     the longest value (default 3, 1 .. 8, at most n − n/2)
//   noise_vocab = N    noise tokens (default 0)
//   noise = f          the chance a slot is noise (default 0, below 1)
//   test = false       MAD's test instances (above)
//   multi_query = false  mad-lab's benchmark layout (`multi_query: True`): no copy prefix (keys
//                      and values take n = V − 1 − N tokens, the pad is V − 1), the final probe
//                      pair follows the context directly, and `test = true` scores the tokens
//                      of every value whose key appeared in an earlier pair, the final one too
// The length is at least 2 (k + v) + 1 (2 (k + v) with multi_query). One difference from mad-lab's
// generator: its loop can end before reaching the probe's drawn position (a few percent of
// sequences at length 128), leaving the question unanswerable; here the probe pair then follows the
// last pair, and the context stops early enough to leave room for it. Example, V = 12, k = v = 2,
// test, length 16: keys 0 .. 4, values 5 .. 9, pad 10, prefix 11; pairs 0 4 → 9 5 and 4 1 → 9 8,
// the question 4 1 → 9 8:
//   10 10 10 10 0 4 9 5 4 1 9 8 11 4 1 9 -> ..............98
class FuzzyRecallTask : public Task {
 public:
  FuzzyRecallTask(int64_t vocab, int64_t key_size, int64_t value_size, int64_t noise_vocab,
                  double noise, bool multi_query, bool test);

  std::string name() const override { return "fuzzy_recall"; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t num_classes() const override { return vocab_; }
  nlohmann::json config() const override;
  void check_length(int64_t length) const override;
  void generate(Rng& rng, SequenceView sequence) const override;

 private:
  int64_t vocab_, key_size_, value_size_, noise_vocab_;
  double noise_;
  bool multi_query_, test_;
  int64_t keys_, values_;  // keys 0 .. keys_ − 1, values keys_ .. keys_ + values_ − 1
};

std::shared_ptr<Task> make_fuzzy_recall_task(Options& options);

}  // namespace memscript
