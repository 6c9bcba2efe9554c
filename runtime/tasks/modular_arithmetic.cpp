#include "runtime/tasks/modular_arithmetic.h"

namespace memscript {

ModularArithmeticTask::ModularArithmeticTask(int64_t modulus) : modulus_(modulus) {}

nlohmann::json ModularArithmeticTask::config() const {
  return {{"task", "modular_arithmetic"}, {"modulus", modulus_}};
}

void ModularArithmeticTask::generate(Rng& rng, SequenceView sequence) const {
  int64_t sum = 0;
  for (int64_t t = 0; t < sequence.length; ++t) {
    const int64_t x = rng.between(0, modulus_ - 1);
    sum += x;
    if (sum >= modulus_) sum -= modulus_;
    sequence.inputs[t] = x;
    sequence.targets[t] = sum;
    sequence.mask[t] = true;
  }
}

std::shared_ptr<Task> make_modular_arithmetic_task(Options& options) {
  return std::make_shared<ModularArithmeticTask>(options.integer("modulus", 5, {.min = 2}));
}

}  // namespace memscript
