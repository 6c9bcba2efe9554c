#include "runtime/optim.h"

namespace memscript {

nlohmann::json OptimizerSpec::config() const {
  return {{"optimizer", kind},
          {"lr", lr},
          {"betas", {beta1, beta2}},
          {"eps", eps},
          {"weight_decay", weight_decay}};
}

std::unique_ptr<torch::optim::Optimizer> OptimizerSpec::make(
    const std::vector<torch::Tensor>& parameters) const {
  auto options = torch::optim::AdamWOptions(lr)
                     .betas(std::make_tuple(beta1, beta2))
                     .eps(eps)
                     .weight_decay(weight_decay);
  return std::make_unique<torch::optim::AdamW>(parameters, options);
}

std::shared_ptr<OptimizerSpec> make_adamw_spec(Options& options) {
  auto spec = std::make_shared<OptimizerSpec>();
  spec->lr = options.number("lr", spec->lr, 0.0, INFINITY);
  if (spec->lr <= 0) options.fail("lr", "must be > 0, got 0");
  const std::vector<double> betas = options.numbers("betas", {spec->beta1, spec->beta2});
  if (betas.size() != 2 || betas[0] < 0 || betas[0] >= 1 || betas[1] < 0 || betas[1] >= 1) {
    options.fail("betas", "must be two numbers in [0, 1), like {0.9, 0.95}");
  }
  spec->beta1 = betas[0];
  spec->beta2 = betas[1];
  spec->eps = options.number("eps", spec->eps, 0.0, INFINITY);
  spec->weight_decay = options.number("weight_decay", spec->weight_decay, 0.0, INFINITY);
  return spec;
}

}  // namespace memscript
