#include "runtime/tasks/parity.h"

#include <numeric>

namespace memscript {

ParityTask::ParityTask(ParitySpec spec) : spec_(spec) {}

nlohmann::json ParityTask::config() const {
  nlohmann::json out = {{"task", "parity"}};
  if (spec_.mode == ParitySpec::Mode::Bernoulli) {
    out["p_one"] = spec_.p_one;
  } else if (spec_.ones_min == spec_.ones_max) {
    out["ones"] = spec_.ones_min;
  } else {
    out["ones"] = {{"min", spec_.ones_min}, {"max", spec_.ones_max}};
  }
  return out;
}

void ParityTask::check_length(int64_t length) const {
  Task::check_length(length);
  if (spec_.mode == ParitySpec::Mode::ExactOnes && spec_.ones_max > length) {
    throw UserError("parity: ones = " + std::to_string(spec_.ones_max) +
                    " is more than the sequence length " + std::to_string(length));
  }
}

// A uniformly random subset of `count` positions: the first `count` entries of a partial
// Fisher-Yates shuffle.
void ParityTask::place_ones(Rng& rng, SequenceView sequence) const {
  const int64_t count = rng.between(spec_.ones_min, spec_.ones_max);
  std::vector<int64_t> positions(static_cast<size_t>(sequence.length));
  std::iota(positions.begin(), positions.end(), 0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = rng.between(i, sequence.length - 1);
    std::swap(positions[i], positions[j]);
    sequence.inputs[positions[i]] = 1;
  }
}

void ParityTask::generate(Rng& rng, SequenceView sequence) const {
  if (spec_.mode == ParitySpec::Mode::Bernoulli) {
    for (int64_t t = 0; t < sequence.length; ++t) sequence.inputs[t] = rng.bernoulli(spec_.p_one);
  } else {
    std::fill(sequence.inputs, sequence.inputs + sequence.length, 0);
    place_ones(rng, sequence);
  }
  int64_t parity = 0;
  for (int64_t t = 0; t < sequence.length; ++t) {
    parity ^= sequence.inputs[t];
    sequence.targets[t] = parity;
    sequence.mask[t] = true;
  }
}

std::shared_ptr<Task> make_parity_task(Options& options) {
  ParitySpec spec;
  const bool has_ones = options.has("ones");
  if (has_ones && options.has("p_one")) {
    options.fail("ones", "and option 'p_one' exclude each other: give one of them");
  }
  spec.p_one = options.number("p_one", 0.5, 0.0, 1.0);
  if (!has_ones) return std::make_shared<ParityTask>(spec);

  spec.mode = ParitySpec::Mode::ExactOnes;
  const LengthRange ones = read_count_range(options, "ones", std::nullopt, 0);
  spec.ones_min = ones.min;
  spec.ones_max = ones.max;
  return std::make_shared<ParityTask>(spec);
}

}  // namespace memscript
