#include "runtime/tasks/cycle_navigation.h"

namespace memscript {

nlohmann::json CycleNavigationTask::config() const {
  return {{"task", "cycle_navigation"}, {"positions", kPositions}};
}

void CycleNavigationTask::generate(Rng& rng, SequenceView sequence) const {
  // Moving back one step is moving forward kPositions - 1 steps.
  const int64_t step[3] = {0, 1, kPositions - 1};
  int64_t position = 0;
  for (int64_t t = 0; t < sequence.length; ++t) {
    const int64_t x = rng.between(0, 2);
    position = (position + step[x]) % kPositions;
    sequence.inputs[t] = x;
    sequence.targets[t] = position;
    sequence.mask[t] = true;
  }
}

std::shared_ptr<Task> make_cycle_navigation_task(Options&) {
  return std::make_shared<CycleNavigationTask>();
}

}  // namespace memscript
