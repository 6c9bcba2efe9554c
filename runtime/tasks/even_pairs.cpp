#include "runtime/tasks/even_pairs.h"

namespace memscript {

nlohmann::json EvenPairsTask::config() const { return {{"task", "even_pairs"}}; }

void EvenPairsTask::generate(Rng& rng, SequenceView sequence) const {
  for (int64_t t = 0; t < sequence.length; ++t) {
    sequence.inputs[t] = rng.bernoulli(0.5) ? 1 : 0;
    sequence.targets[t] = sequence.inputs[t] == sequence.inputs[0] ? 1 : 0;
    sequence.mask[t] = true;
  }
}

std::shared_ptr<Task> make_even_pairs_task(Options&) { return std::make_shared<EvenPairsTask>(); }

}  // namespace memscript
