#include "runtime/optim.h"

#include <cmath>

namespace memscript {

namespace {

// Everything one update needs besides the tensors, worked out once per step.
struct UpdateConstants {
  double beta1 = 0;
  double beta2 = 0;
  double step_size = 0;   // adam: lr / (1 - beta1^t); sgd: lr
  double bias2_sqrt = 1;  // adam: sqrt(1 - beta2^t)
  double eps = 0;
  double l2 = 0;          // weight decay added to the gradient (adam, sgd)
  double keep = 1;        // decoupled weight decay: p *= 1 - lr * weight_decay (adamw)
  double grad_scale = 1;  // clipping
};

template <typename T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const UpdateConstants& c) {
  const T beta1 = static_cast<T>(c.beta1), beta2 = static_cast<T>(c.beta2);
  const T rest1 = static_cast<T>(1 - c.beta1), rest2 = static_cast<T>(1 - c.beta2);
  const T step_size = static_cast<T>(c.step_size), bias2_sqrt = static_cast<T>(c.bias2_sqrt);
  const T eps = static_cast<T>(c.eps), l2 = static_cast<T>(c.l2), keep = static_cast<T>(c.keep);
  const T scale = static_cast<T>(c.grad_scale);
  for (int64_t i = 0; i < n; ++i) {
    const T grad = g[i] * scale + l2 * p[i];
    m[i] = beta1 * m[i] + rest1 * grad;
    v[i] = beta2 * v[i] + rest2 * grad * grad;
    const T denominator = std::sqrt(v[i]) / bias2_sqrt + eps;
    p[i] = p[i] * keep - step_size * (m[i] / denominator);
  }
}

// Plain SGD when momentum is 0 (no buffer); torch's momentum SGD otherwise (the first
// buffer is the gradient itself, which a zero buffer gives).
template <typename T>
void sgd_update(T* p, const T* g, T* buffer, int64_t n, double momentum, const UpdateConstants& c) {
  const T mu = static_cast<T>(momentum), lr = static_cast<T>(c.step_size);
  const T l2 = static_cast<T>(c.l2), scale = static_cast<T>(c.grad_scale);
  for (int64_t i = 0; i < n; ++i) {
    T grad = g[i] * scale + l2 * p[i];
    if (buffer) {
      buffer[i] = mu * buffer[i] + grad;
      grad = buffer[i];
    }
    p[i] = p[i] - lr * grad;
  }
}

template <typename T>
double sum_of_squares(const T* g, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return sum;
}

bool is_adam(const OptimizerSpec& spec) { return spec.kind != "sgd"; }

UpdateConstants constants_for(const OptimizerSpec& spec, int64_t step, double lr,
                              double grad_scale) {
  UpdateConstants c;
  c.grad_scale = grad_scale;
  c.eps = spec.eps;
  if (!is_adam(spec)) {
    c.step_size = lr;
    c.l2 = spec.weight_decay;
    return c;
  }
  c.beta1 = spec.beta1;
  c.beta2 = spec.beta2;
  c.step_size = lr / (1 - std::pow(spec.beta1, static_cast<double>(step)));
  c.bias2_sqrt = std::sqrt(1 - std::pow(spec.beta2, static_cast<double>(step)));
  if (spec.kind == "adamw") {
    c.keep = 1 - lr * spec.weight_decay;
  } else {
    c.l2 = spec.weight_decay;
  }
  return c;
}

}  // namespace

double OptimizerSpec::lr_at(int64_t step, int64_t total) const {
  if (schedule.warmup > 0 && step <= schedule.warmup) {
    return lr * static_cast<double>(step) / static_cast<double>(schedule.warmup);
  }
  if (schedule.decay == "constant") return lr;
  const double span = static_cast<double>(std::max<int64_t>(1, total - schedule.warmup));
  const double progress = std::clamp(static_cast<double>(step - schedule.warmup) / span, 0.0, 1.0);
  const double remaining =
      schedule.decay == "cosine" ? 0.5 * (1 + std::cos(M_PI * progress)) : 1 - progress;
  return schedule.min_lr + (lr - schedule.min_lr) * remaining;
}

std::unique_ptr<Optimizer> OptimizerSpec::make(const std::vector<torch::Tensor>& parameters) const {
  return std::make_unique<Optimizer>(*this, parameters);
}

nlohmann::json OptimizerSpec::config() const {
  nlohmann::json out = {{"optimizer", kind}, {"lr", lr}, {"weight_decay", weight_decay}};
  if (is_adam(*this)) {
    out["betas"] = {beta1, beta2};
    out["eps"] = eps;
  } else {
    out["momentum"] = momentum;
  }
  out["schedule"] = {
      {"warmup", schedule.warmup}, {"decay", schedule.decay}, {"min_lr", schedule.min_lr}};
  return out;
}

const std::vector<std::string>& optimizer_kinds() {
  static const std::vector<std::string> kinds = {"adam", "adamw", "sgd"};
  return kinds;
}

std::shared_ptr<OptimizerSpec> make_optimizer_spec(const std::string& kind, Options& options) {
  auto spec = std::make_shared<OptimizerSpec>();
  spec->kind = kind;
  spec->lr = options.number("lr", spec->lr, 0.0, INFINITY);
  if (spec->lr <= 0) options.fail("lr", "must be > 0, got 0");
  spec->weight_decay = options.number("weight_decay", kind == "adamw" ? 0.01 : 0.0, 0.0, INFINITY);
  if (kind == "sgd") {
    spec->momentum = options.number("momentum", 0.0, 0.0, 1.0);
    if (spec->momentum >= 1) options.fail("momentum", "must be in [0, 1), got 1");
  } else {
    const std::vector<double> betas = options.numbers("betas", {spec->beta1, spec->beta2});
    if (betas.size() != 2 || betas[0] < 0 || betas[0] >= 1 || betas[1] < 0 || betas[1] >= 1) {
      options.fail("betas", "must be two numbers in [0, 1), like {0.9, 0.95}");
    }
    spec->beta1 = betas[0];
    spec->beta2 = betas[1];
    spec->eps = options.number("eps", spec->eps, 0.0, INFINITY);
  }
  spec->schedule.warmup = options.integer("warmup", 0, {.min = 0});
  spec->schedule.decay = options.string("decay", "constant", {"constant", "cosine", "linear"});
  spec->schedule.min_lr = options.number("min_lr", 0.0, 0.0, spec->lr);
  return spec;
}

Optimizer::Optimizer(const OptimizerSpec& spec, std::vector<torch::Tensor> parameters)
    : spec_(spec), parameters_(std::move(parameters)) {
  torch::NoGradGuard no_grad;
  const bool needs_first = is_adam(spec_) || spec_.momentum > 0;
  for (const torch::Tensor& p : parameters_) {
    first_.push_back(needs_first ? torch::zeros_like(p).contiguous() : torch::Tensor());
    second_.push_back(is_adam(spec_) ? torch::zeros_like(p).contiguous() : torch::Tensor());
  }
}

// Drops the gradients rather than zeroing them, as torch.optim's zero_grad(set_to_none=True)
// does: the next backward then hands each parameter its gradient tensor as it is, instead of
// a zero_ and an add_ per parameter every step. step() skips a parameter without a gradient.
void Optimizer::zero_grad() {
  for (torch::Tensor& p : parameters_) p.mutable_grad().reset();
}

double Optimizer::gradient_norm() const {
  double sum = 0;
  for (const torch::Tensor& p : parameters_) {
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    if (grad.is_cpu() && grad.is_contiguous() && grad.scalar_type() == torch::kFloat) {
      sum += sum_of_squares(grad.data_ptr<float>(), grad.numel());
    } else if (grad.is_cpu() && grad.is_contiguous() && grad.scalar_type() == torch::kDouble) {
      sum += sum_of_squares(grad.data_ptr<double>(), grad.numel());
    } else {
      sum += grad.to(torch::kDouble).square().sum().item<double>();
    }
  }
  return std::sqrt(sum);
}

double clip_scale(double norm, double max_norm) {
  return max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
}

void Optimizer::step(double lr, double scale) {
  torch::NoGradGuard no_grad;
  ++steps_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].grad().defined()) continue;
    const torch::Tensor& p = parameters_[i];
    const bool fast = p.is_cpu() && p.is_contiguous() && p.grad().is_contiguous() &&
                      (p.scalar_type() == torch::kFloat || p.scalar_type() == torch::kDouble) &&
                      p.grad().scalar_type() == p.scalar_type();
    if (fast) {
      step_cpu(i, lr, scale);
    } else {
      step_tensor_ops(i, lr, scale);
    }
  }
}

void Optimizer::step_cpu(size_t index, double lr, double grad_scale) {
  torch::Tensor& p = parameters_[index];
  const UpdateConstants c = constants_for(spec_, steps_, lr, grad_scale);
  const int64_t n = p.numel();
  const auto run = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* values = p.data_ptr<T>();
    const T* grad = p.grad().data_ptr<T>();
    T* first = first_[index].defined() ? first_[index].data_ptr<T>() : nullptr;
    if (is_adam(spec_)) {
      adam_update(values, grad, first, second_[index].data_ptr<T>(), n, c);
    } else {
      sgd_update(values, grad, first, n, spec_.momentum, c);
    }
  };
  if (p.scalar_type() == torch::kFloat) {
    run(static_cast<float*>(nullptr));
  } else {
    run(static_cast<double*>(nullptr));
  }
}

void Optimizer::step_tensor_ops(size_t index, double lr, double grad_scale) {
  torch::Tensor& p = parameters_[index];
  const UpdateConstants c = constants_for(spec_, steps_, lr, grad_scale);
  torch::Tensor grad = p.grad() * grad_scale;
  if (c.l2 != 0) grad = grad + c.l2 * p;
  if (!is_adam(spec_)) {
    if (first_[index].defined()) {
      first_[index].mul_(spec_.momentum).add_(grad);
      grad = first_[index];
    }
    p.add_(grad, -c.step_size);
    return;
  }
  first_[index].mul_(c.beta1).add_(grad, 1 - c.beta1);
  second_[index].mul_(c.beta2).addcmul_(grad, grad, 1 - c.beta2);
  const torch::Tensor denominator = (second_[index].sqrt() / c.bias2_sqrt).add_(c.eps);
  if (c.keep != 1) p.mul_(c.keep);
  p.addcdiv_(first_[index], denominator, -c.step_size);
}

void Optimizer::save(torch::serialize::OutputArchive& archive) const {
  archive.write("steps", c10::IValue(steps_));
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (first_[i].defined()) archive.write("first." + std::to_string(i), first_[i]);
    if (second_[i].defined()) archive.write("second." + std::to_string(i), second_[i]);
  }
}

void Optimizer::load(torch::serialize::InputArchive& archive) {
  torch::NoGradGuard no_grad;
  c10::IValue steps;
  archive.read("steps", steps);
  steps_ = steps.toInt();
  const auto restore = [&](const std::string& key, torch::Tensor& into) {
    if (!into.defined()) return;
    torch::Tensor saved;
    archive.read(key, saved);
    if (!saved.sizes().equals(into.sizes())) {
      throw UserError("checkpoint: optimizer state " + key + " does not fit the model");
    }
    into.copy_(saved);
  };
  for (size_t i = 0; i < parameters_.size(); ++i) {
    restore("first." + std::to_string(i), first_[i]);
    restore("second." + std::to_string(i), second_[i]);
  }
}

}  // namespace memscript
