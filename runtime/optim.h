#pragma once

// Optimizer specifications: what the script asked for, turned into a libtorch optimizer once
// the parameters it should move are known (ms.train binds it to the model).

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/options.h"
#include "runtime/torch.h"

namespace memscript {

struct OptimizerSpec {
  std::string kind = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;

  nlohmann::json config() const;
  std::unique_ptr<torch::optim::Optimizer> make(const std::vector<torch::Tensor>& parameters) const;
};

// ms.optim.adamw{ lr, betas = {b1, b2}, eps, weight_decay }
std::shared_ptr<OptimizerSpec> make_adamw_spec(Options& options);

}  // namespace memscript
