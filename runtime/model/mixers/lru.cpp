#include "runtime/model/mixers/lru.h"

#include <numbers>

#include "runtime/ops/common/launch.h"
#include "runtime/ops/complex_scan/complex_scan.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

namespace {

// Keeps the initial a off 0 and 1, where ν = log(−log a) is ±∞.
constexpr double kRingMargin = 1e-6;

torch::nn::Linear make_weight(int64_t in, int64_t out) {
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out).bias(false));
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, 0.02);
  return linear;
}

// ν such that the real factor starts at |λ| = ρ, drawn on the ring: ρ² uniform in
// [r_min², r_max²]. Computed in double so that ρ near 1 survives the two logarithms.
torch::Tensor ring_nu(int64_t n, double r_min, double r_max, bool negative_eigenvalues) {
  const torch::Tensor u = torch::rand({n}, torch::kDouble);
  const torch::Tensor rho = torch::sqrt(u * (r_max * r_max - r_min * r_min) + r_min * r_min);
  // a = exp(−exp ν) must equal ρ, or (1 + ρ) / 2 when a is stretched to 2·exp(−exp ν) − 1.
  const torch::Tensor a = negative_eigenvalues ? (1 + rho) / 2 : rho;
  const torch::Tensor a_safe = a.clamp(kRingMargin, 1 - kRingMargin);
  return torch::log(-torch::log(a_safe)).to(torch::kFloat);
}

// θ = log φ with φ uniform in [0, max_phase], kept off φ = 0.
torch::Tensor ring_theta(int64_t n, double max_phase) {
  const torch::Tensor phase = torch::rand({n}, torch::kDouble).clamp_min(kRingMargin) * max_phase;
  return torch::log(phase).to(torch::kFloat);
}

}  // namespace

LruMixerImpl::LruMixerImpl(const MixerContext& context, Options& options)
    : d_state_(options.integer("d_state", context.d_model, {.min = 1})),
      r_min_(options.number("r_min", 0.0)),
      r_max_(options.number("r_max", 1.0)),
      max_phase_(options.number("max_phase", 2 * std::numbers::pi)),
      negative_eigenvalues_(options.boolean("negative_eigenvalues", false)),
      impl_(read_impl(options)) {
  if (r_min_ < 0) options.fail("r_min", "must be >= 0, got " + std::to_string(r_min_));
  if (r_max_ > 1) {
    options.fail("r_max", "must be <= 1 (|λ| < 1 keeps the recurrence stable), got " +
                              std::to_string(r_max_));
  }
  if (r_min_ >= r_max_) {
    options.fail("r_min", "must be < r_max, got r_min = " + std::to_string(r_min_) +
                              ", r_max = " + std::to_string(r_max_));
  }
  if (!(max_phase_ >= 0)) {
    options.fail("max_phase", "must be >= 0, got " + std::to_string(max_phase_));
  }
  nu_ = register_parameter("nu", ring_nu(d_state_, r_min_, r_max_, negative_eigenvalues_));
  if (max_phase_ > 0) theta_ = register_parameter("theta", ring_theta(d_state_, max_phase_));
  b_re_ = register_module("b_re", make_weight(context.d_model, d_state_));
  b_im_ = register_module("b_im", make_weight(context.d_model, d_state_));
  c_re_ = register_module("c_re", make_weight(d_state_, context.d_model));
  c_im_ = register_module("c_im", make_weight(d_state_, context.d_model));
  d_ = register_parameter("d", torch::empty({context.d_model}));
  output_ = register_module("output", torch::nn::Linear(context.d_model, context.d_model));
  torch::NoGradGuard no_grad;
  d_.normal_(0.0, 0.02);
  init_output_projection(output_, context.layers);
}

torch::Tensor LruMixerImpl::real_factor() const {
  const torch::Tensor decay = torch::exp(-torch::exp(nu_));
  return negative_eigenvalues_ ? 2 * decay - 1 : decay;
}

// 1 − a² written with expm1 so that it stays accurate (and positive) as a approaches 1:
// 1 − e^{−2s} = −expm1(−2s), and 1 − (2e^{−s} − 1)² = 4e^{−s}·(−expm1(−s)), with s = exp(ν).
torch::Tensor LruMixerImpl::input_scale() const {
  const torch::Tensor s = torch::exp(nu_);
  const torch::Tensor one_minus_a2 =
      negative_eigenvalues_ ? 4 * torch::exp(-s) * -torch::expm1(-s) : -torch::expm1(-2 * s);
  return torch::sqrt(one_minus_a2);
}

std::pair<torch::Tensor, torch::Tensor> LruMixerImpl::eigenvalues() const {
  const torch::Tensor a = real_factor();
  if (!theta_.defined()) return {a, torch::zeros_like(a)};
  const torch::Tensor phase = torch::exp(theta_);
  return {a * torch::cos(phase), a * torch::sin(phase)};
}

MixerOutput LruMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const auto [lambda_re, lambda_im] = eigenvalues();
  // γ ⊙ (B x) as (γ B) x: the scale goes onto the [d_state, d_model] weight, not onto every
  // token's projection (two products and their backward over [batch, length, d_state]).
  const torch::Tensor gamma = input_scale().unsqueeze(1);
  const torch::Tensor in_re = ops::linear(x, gamma * b_re_->weight, torch::Tensor());
  const torch::Tensor in_im = ops::linear(x, gamma * b_im_->weight, torch::Tensor());
  torch::Tensor re, im;
  if (state.empty()) {
    re = torch::zeros({x.size(0), d_state_}, x.options());
    im = torch::zeros_like(re);
  } else {
    re = state.tensors.at(0);
    im = state.tensors.at(1);
  }
  const ops::ComplexScanResult scan =
      impl_.fused ? ops::complex_scan(lambda_re, lambda_im, in_re, in_im, re, im)
                  : ops::complex_scan_reference(lambda_re, lambda_im, in_re, in_im, re, im);
  // Re(C x) = C_re·re − C_im·im.
  const torch::Tensor y = ops::linear(c_re_, scan.h_re) - ops::linear(c_im_, scan.h_im) + d_ * x;
  return {ops::linear(output_, y), {{scan.last_re, scan.last_im}, state.position + x.size(1)}};
}

nlohmann::json LruMixerImpl::config() const {
  return {{"mixer", "lru"},          {"d_state", d_state_},
          {"r_min", r_min_},         {"r_max", r_max_},
          {"max_phase", max_phase_}, {"negative_eigenvalues", negative_eigenvalues_},
          {"impl", impl_.name()}};
}

Mixer make_lru_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<LruMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry lru_entry() {
  return {.name = "lru",
          .make = make_lru_mixer,
          .recurrent = true,
          .negative_eigenvalues = true,
          .short_conv = false,
          .seed_mini = {{"d_state", option(4)}},
          .seed_mini_alone_decoder = {{"d_model", option(128)}, {"mlp_ratio", option(1)}}};
}

}  // namespace memscript
