#include "runtime/tasks/in_context_recall.h"

#include <vector>

namespace memscript {

InContextRecallTask::InContextRecallTask(int64_t vocab, int64_t noise_vocab, double noise,
                                         bool multi_query, bool test)
    : vocab_(vocab),
      noise_vocab_(noise_vocab),
      noise_(noise),
      multi_query_(multi_query),
      test_(test) {
  const int64_t plain = vocab_ - noise_vocab_ - (multi_query_ ? 0 : 1);
  keys_ = plain / 2;
  values_ = plain - keys_;
}

nlohmann::json InContextRecallTask::config() const {
  return {{"task", "in_context_recall"}, {"vocab", vocab_},
          {"noise_vocab", noise_vocab_}, {"noise", noise_},
          {"multi_query", multi_query_}, {"test", test_}};
}

void InContextRecallTask::check_length(int64_t length) const {
  Task::check_length(length);
  if (multi_query_ && (length < 3 || length % 2 != 1)) {
    throw UserError(
        "in_context_recall: with multi_query, length must be odd and at least 3 (the model "
        "reads all but the last of the pairs' tokens), got " +
        std::to_string(length));
  }
  if (!multi_query_ && (length < 4 || length % 2 != 0)) {
    throw UserError(
        "in_context_recall: length must be even and at least 4 (pairs, the copy "
        "prefix and a probe key), got " +
        std::to_string(length));
  }
}

void InContextRecallTask::generate(Rng& rng, SequenceView sequence) const {
  const int64_t length = sequence.length;
  // The length + 1 tokens of which the model reads the first `length` and predicts the last:
  // the slots, then (single query) the copy prefix, the probe key and its value, or
  // (multi_query, odd length) the final pair. Both hold (length + 1) / 2 − 1 slots.
  const int64_t slots = (length + 1) / 2 - 1;
  const int64_t kept = rng.between(0, slots - 1);
  std::vector<int64_t> bound(static_cast<size_t>(keys_), -1);
  std::vector<int64_t> presented;
  std::vector<int64_t> x(static_cast<size_t>(length) + 1);
  std::vector<bool> asked(x.size(), false);  // a value whose key appeared in an earlier pair
  for (int64_t i = 0; i < slots; ++i) {
    if (i != kept && noise_ > 0 && rng.uniform() < noise_) {
      const int64_t first = keys_ + values_;
      x[2 * i] = first + rng.between(0, noise_vocab_ - 1);
      x[2 * i + 1] = first + rng.between(0, noise_vocab_ - 1);
      continue;
    }
    const int64_t key = rng.between(0, keys_ - 1);
    if (bound[key] < 0) {
      bound[key] = keys_ + rng.between(0, values_ - 1);
      presented.push_back(key);
    } else if (multi_query_) {
      asked[2 * i + 1] = true;
    }
    x[2 * i] = key;
    x[2 * i + 1] = bound[key];
  }
  const int64_t probe = presented[rng.below(presented.size())];
  const size_t end = x.size();
  if (!multi_query_) x[end - 3] = vocab_ - 1;
  x[end - 2] = probe;
  x[end - 1] = bound[probe];
  asked[end - 1] = true;
  std::copy(x.begin(), x.begin() + length, sequence.inputs);
  for (int64_t t = 0; t < length; ++t) {
    sequence.targets[t] = x[t + 1];
    sequence.mask[t] = !test_ || asked[t + 1];
  }
}

std::shared_ptr<Task> make_in_context_recall_task(Options& options) {
  const int64_t vocab = options.integer("vocab", 16, {.min = 4, .max = 1 << 20});
  const int64_t noise_vocab = options.integer("noise_vocab", 0, {.min = 0, .max = vocab - 3});
  const double noise = options.number("noise", 0.0, 0.0, 0.999);
  if (noise > 0 && noise_vocab == 0) {
    options.fail("noise", "above 0 needs noise tokens: set noise_vocab");
  }
  const bool multi_query = options.boolean("multi_query", false);
  const bool test = options.boolean("test", false);
  return std::make_shared<InContextRecallTask>(vocab, noise_vocab, noise, multi_query, test);
}

}  // namespace memscript
