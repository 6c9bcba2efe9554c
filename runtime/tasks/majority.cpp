#include "runtime/tasks/majority.h"

namespace memscript {

nlohmann::json MajorityTask::config() const { return {{"task", "majority"}}; }

void MajorityTask::generate(Rng& rng, SequenceView sequence) const {
  int64_t lead = 0;  // ones minus zeros so far
  for (int64_t t = 0; t < sequence.length; ++t) {
    const int64_t x = rng.bernoulli(0.5) ? 1 : 0;
    lead += x == 1 ? 1 : -1;
    sequence.inputs[t] = x;
    sequence.targets[t] = lead > 0 ? 1 : 0;
    sequence.mask[t] = true;
  }
}

std::shared_ptr<Task> make_majority_task(Options&) { return std::make_shared<MajorityTask>(); }

}  // namespace memscript
