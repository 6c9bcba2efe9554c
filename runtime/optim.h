#pragma once

// Optimizers: what the script asked for (OptimizerSpec: kind, hyper-parameters, learning-rate
// schedule), and the optimizer that moves a model's parameters (Optimizer).
//
// The CPU step is one pass per parameter tensor in plain C++ over raw pointers: gradient norm,
// clipping and the update of Adam, AdamW or SGD fused, with no libtorch op per parameter.
// A seed-mini model has about 20 tensors of a few dozen numbers each, where dispatching
// dozens of small ops per tensor would cost far more than the arithmetic. The loop is the same
// whatever the thread count (it runs on the calling thread), so the step is bit-deterministic;
// its whole state is a step count and one or two tensors per parameter, saved in checkpoints.
// Parameters on another device (CUDA) take the same formulas through libtorch ops.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/options.h"
#include "runtime/torch.h"

namespace memscript {

// Learning rate over training: linear warmup over the first `warmup` steps (lr * step /
// warmup), then `decay`: "constant", or "cosine" / "linear" from lr at the end of the warmup
// down to min_lr at the last step.
struct ScheduleSpec {
  int64_t warmup = 0;
  std::string decay = "constant";
  double min_lr = 0;
};

class Optimizer;

struct OptimizerSpec {
  std::string kind = "adamw";  // "adam", "adamw" or "sgd"
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled for adamw; added to the gradient for adam and sgd
  double momentum = 0;         // sgd only
  ScheduleSpec schedule;

  nlohmann::json config() const;
  // The learning rate of `step` (1-based) of a run of `total` steps.
  double lr_at(int64_t step, int64_t total) const;
  // An optimizer for `parameters`, for loops outside ms.train (benchmarks, tests).
  std::unique_ptr<Optimizer> make(const std::vector<torch::Tensor>& parameters) const;
};

// ms.optim.<kind>{ lr, betas = {b1, b2}, eps, weight_decay, momentum, warmup, decay, min_lr }
std::shared_ptr<OptimizerSpec> make_optimizer_spec(const std::string& kind, Options& options);
const std::vector<std::string>& optimizer_kinds();

// The factor that clips gradients of global norm `norm` to `max_norm`, as torch's
// clip_grad_norm_: max_norm / (norm + 1e-6) when that is below 1; 1 when max_norm <= 0.
double clip_scale(double norm, double max_norm);

class Optimizer {
 public:
  Optimizer(const OptimizerSpec& spec, std::vector<torch::Tensor> parameters);

  void zero_grad();
  // The global (L2) norm of all gradients, summed in double precision.
  double gradient_norm() const;
  // Updates every parameter that has a gradient with learning rate `lr`, the gradients
  // multiplied by `grad_scale` (see clip_scale).
  void step(double lr, double grad_scale = 1);
  void step() { step(spec_.lr); }  // at the spec's base lr, no schedule, no clipping
  int64_t steps_taken() const { return steps_; }

  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  void step_cpu(size_t index, double lr, double grad_scale);
  void step_tensor_ops(size_t index, double lr, double grad_scale);

  OptimizerSpec spec_;
  std::vector<torch::Tensor> parameters_;
  std::vector<torch::Tensor> first_;   // adam: exp_avg; sgd: momentum buffer
  std::vector<torch::Tensor> second_;  // adam: exp_avg_sq
  int64_t steps_ = 0;
};

}  // namespace memscript
