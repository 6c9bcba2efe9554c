#include "runtime/model/mixers/mamba.h"

#include <cmath>

#include "runtime/ops/common/launch.h"
#include "runtime/ops/linear/linear.h"
#include "runtime/ops/selective_scan/selective_scan.h"

namespace memscript {

namespace {

// The reference implementation's range for the initial step sizes Δ.
constexpr double kDtMin = 1e-3;
constexpr double kDtMax = 1e-1;
constexpr double kDtFloor = 1e-4;

void init_normal(torch::nn::Linear& linear) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, 0.02);
  if (linear->bias.defined()) linear->bias.zero_();
}

}  // namespace

MambaMixerImpl::MambaMixerImpl(const MixerContext& context, Options& options)
    : expand_(options.integer("expand", 2, {.min = 1})),
      d_inner_(expand_ * context.d_model),
      d_state_(options.integer("d_state", 16, {.min = 1})),
      d_conv_(options.integer("d_conv", 4, {.min = 1})),
      dt_rank_(options.integer("dt_rank", (context.d_model + 15) / 16, {.min = 1})),
      negative_eigenvalues_(options.boolean("negative_eigenvalues", false)),
      impl_(read_impl(options)) {
  const auto no_bias = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  in_proj_ = register_module("in_proj", no_bias(context.d_model, 2 * d_inner_));
  conv_ = register_module(
      "conv",
      torch::nn::Conv1d(torch::nn::Conv1dOptions(d_inner_, d_inner_, d_conv_).groups(d_inner_)));
  x_proj_ = register_module("x_proj", no_bias(d_inner_, dt_rank_ + 2 * d_state_));
  dt_proj_ = register_module("dt_proj", torch::nn::Linear(dt_rank_, d_inner_));
  out_proj_ = register_module("out_proj", no_bias(d_inner_, context.d_model));
  init_normal(in_proj_);
  init_normal(x_proj_);
  init_dt_projection();
  init_output_projection(out_proj_, context.layers);
  torch::NoGradGuard no_grad;
  A_log_ = register_parameter(
      "A_log", torch::log(torch::arange(1, d_state_ + 1, torch::kFloat)).repeat({d_inner_, 1}));
  D_ = register_parameter("D", torch::ones({d_inner_}));
}

// Δ starts log-uniform in [kDtMin, kDtMax]: the bias is softplus⁻¹ of the drawn dt, and the
// weights are small enough (±dt_rank^−½) that the input only perturbs it.
void MambaMixerImpl::init_dt_projection() {
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(dt_rank_));
  dt_proj_->weight.uniform_(-bound, bound);
  const torch::Tensor dt =
      torch::exp(torch::rand({d_inner_}) * (std::log(kDtMax) - std::log(kDtMin)) + std::log(kDtMin))
          .clamp_min(kDtFloor);
  dt_proj_->bias.copy_(dt + torch::log(-torch::expm1(-dt)));
}

ops::CausalConvResult MambaMixerImpl::convolve(const torch::Tensor& x, const MixerState& state) {
  const torch::Tensor window = state.empty() ? torch::Tensor() : state.tensors.at(0);
  return impl_.fused ? ops::causal_conv_silu(x, window, conv_->weight, conv_->bias)
                     : ops::causal_conv_silu_reference(x, window, conv_->weight, conv_->bias);
}

MixerOutput MambaMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const std::vector<torch::Tensor> xz = ops::linear(in_proj_, x).chunk(2, -1);
  const auto [u, window] = convolve(xz[0], state);
  const std::vector<torch::Tensor> parts =
      ops::linear(x_proj_, u).split_with_sizes({dt_rank_, d_state_, d_state_}, -1);
  const torch::Tensor delta = ops::linear(dt_proj_, parts[0], ops::Activation::softplus);
  const torch::Tensor h0 = state.empty()
                               ? torch::zeros({x.size(0), d_inner_, d_state_}, x.options())
                               : state.tensors.at(1);
  const torch::Tensor A = -torch::exp(A_log_);
  const ops::SelectiveScanResult scan =
      impl_.fused ? ops::selective_scan(u, delta, A, parts[1], parts[2], h0, negative_eigenvalues_)
                  : ops::selective_scan_reference(u, delta, A, parts[1], parts[2], h0,
                                                  negative_eigenvalues_);
  const torch::Tensor y = (scan.y + u * D_) * ops::activation(xz[1], ops::Activation::silu);
  return {ops::linear(out_proj_, y), {{window, scan.h_last}, state.position + x.size(1)}};
}

nlohmann::json MambaMixerImpl::config() const {
  return {{"mixer", "mamba"},
          {"expand", expand_},
          {"d_inner", d_inner_},
          {"d_state", d_state_},
          {"d_conv", d_conv_},
          {"dt_rank", dt_rank_},
          {"negative_eigenvalues", negative_eigenvalues_},
          {"impl", impl_.name()}};
}

Mixer make_mamba_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<MambaMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry mamba_entry() {
  return {.name = "mamba",
          .make = make_mamba_mixer,
          .recurrent = true,
          .negative_eigenvalues = true,
          .short_conv = false,
          .seed_mini = {{"d_state", option(8)},
                        {"d_conv", option(3)},
                        {"expand", option(2)},
                        {"dt_rank", option(1)}},
          .seed_mini_alone_decoder = {{"mlp_ratio", option(0)}}};
}

}  // namespace memscript
