#include "runtime/tasks/dyck.h"

#include <algorithm>
#include <vector>

namespace memscript {

DyckTask::DyckTask(DyckSpec spec) : spec_(spec) {}

nlohmann::json DyckTask::config() const {
  return {{"task", "dyck"},
          {"pairs", spec_.pairs},
          {"max_depth", spec_.max_depth},
          {"negative_share", spec_.negative_share}};
}

void DyckTask::check_length(int64_t length) const {
  Task::check_length(length);
  if (length % 2 != 0) {
    throw UserError("dyck: length must be even (a balanced word has an even length), got " +
                    std::to_string(length));
  }
}

// A random walk that stays within depth D and closes every bracket by the end.
void DyckTask::positive(Rng& rng, SequenceView sequence) const {
  std::vector<int64_t> stack;
  stack.reserve(static_cast<size_t>(std::min(spec_.max_depth, sequence.length)));
  for (int64_t t = 0; t < sequence.length; ++t) {
    const auto depth = static_cast<int64_t>(stack.size());
    const bool close = depth > 0 && (sequence.length - t == depth || depth >= spec_.max_depth ||
                                     rng.bernoulli(0.5));
    if (close) {
      sequence.inputs[t] = stack.back() + spec_.pairs;
      stack.pop_back();
    } else {
      const int64_t kind = rng.between(0, spec_.pairs - 1);
      sequence.inputs[t] = kind;
      stack.push_back(kind);
    }
  }
}

int64_t DyckTask::label(SequenceView sequence) const {
  std::vector<int64_t> stack;
  bool broken = false;
  for (int64_t t = 0; t < sequence.length; ++t) {
    const int64_t token = sequence.inputs[t];
    if (!broken) {
      if (token < spec_.pairs) {
        stack.push_back(token);
        broken = static_cast<int64_t>(stack.size()) > spec_.max_depth;
      } else if (stack.empty() || stack.back() != token - spec_.pairs) {
        broken = true;
      } else {
        stack.pop_back();
      }
    }
    sequence.targets[t] = !broken && stack.empty() ? 1 : 0;
    sequence.mask[t] = true;
  }
  return sequence.length > 0 ? sequence.targets[sequence.length - 1] : 0;
}

// Shuffles the suffix after a random balanced position of a positive until the sequence no
// longer ends balanced. The suffix holds at least one open and one close, so an unbalanced
// order exists; after a bounded number of tries a close is moved to the suffix's front.
void DyckTask::make_negative(Rng& rng, SequenceView sequence) const {
  std::vector<int64_t> balanced = {0};
  int64_t depth = 0;
  for (int64_t t = 0; t + 1 < sequence.length; ++t) {
    depth += sequence.inputs[t] < spec_.pairs ? 1 : -1;
    if (depth == 0) balanced.push_back(t + 1);
  }
  const int64_t start =
      balanced[static_cast<size_t>(rng.below(static_cast<uint64_t>(balanced.size())))];
  int64_t* suffix = sequence.inputs + start;
  const int64_t size = sequence.length - start;
  for (int attempt = 0; attempt < 64; ++attempt) {
    for (int64_t i = size - 1; i > 0; --i) std::swap(suffix[i], suffix[rng.between(0, i)]);
    if (label(sequence) == 0) return;
  }
  std::iter_swap(suffix, std::find_if(suffix, suffix + size,
                                      [&](int64_t token) { return token >= spec_.pairs; }));
}

void DyckTask::generate(Rng& rng, SequenceView sequence) const {
  positive(rng, sequence);
  if (rng.bernoulli(spec_.negative_share)) make_negative(rng, sequence);
  label(sequence);
}

std::string DyckTask::token_text(int64_t token) const {
  static const char kOpen[] = "([{<";
  static const char kClose[] = ")]}>";
  if (spec_.pairs > 4) return Task::token_text(token);
  return std::string(1, token < spec_.pairs ? kOpen[token] : kClose[token - spec_.pairs]);
}

std::shared_ptr<Task> make_dyck_task(Options& options) {
  DyckSpec spec;
  spec.pairs = options.integer("pairs", spec.pairs, {.min = 1});
  spec.max_depth = options.integer("max_depth", spec.max_depth, {.min = 1});
  spec.negative_share = options.number("negative_share", spec.negative_share, 0.0, 1.0);
  return std::make_shared<DyckTask>(spec);
}

}  // namespace memscript
