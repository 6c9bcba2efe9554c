#include "runtime/model/mixers/gated_deltanet.h"

#include <cmath>
#include "runtime/ops/linear/linear.h"

namespace memscript {

namespace {

// log A with A uniform in [1, 16] (Mamba-2's range of decay rates).
torch::Tensor initial_a_log(int64_t heads) { return torch::empty({heads}).uniform_(1, 16).log(); }

// softplus⁻¹(dt) with dt log-uniform in [0.001, 0.1], so softplus(dt_bias) starts at dt.
torch::Tensor initial_dt_bias(int64_t heads) {
  const torch::Tensor dt = torch::empty({heads}).uniform_(std::log(0.001), std::log(0.1)).exp();
  return dt + torch::log(-torch::expm1(-dt));
}

}  // namespace

GatedDeltaNetMixerImpl::GatedDeltaNetMixerImpl(const MixerContext& context, Options& options)
    : DeltaNetMixerImpl("gated_deltanet", context, options) {
  // dt_bias is the bias; the projection needs none of its own.
  alpha_ = register_input_projection(*this, "alpha", context.d_model, shape().heads, false);
  if (xavier_gain() > 0) init_xavier_uniform(alpha_, xavier_gain());
  a_log_ = register_parameter("a_log", initial_a_log(shape().heads));
  dt_bias_ = register_parameter("dt_bias", initial_dt_bias(shape().heads));
}

torch::Tensor GatedDeltaNetMixerImpl::decay(const torch::Tensor& x) {
  const torch::Tensor step = ops::linear(x, alpha_->weight, dt_bias_, ops::Activation::softplus);
  return torch::exp(-torch::exp(a_log_) * step).transpose(1, 2);
}

Mixer make_gated_deltanet_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<GatedDeltaNetMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry gated_deltanet_entry() {
  return {.name = "gated_deltanet",
          .make = make_gated_deltanet_mixer,
          .recurrent = true,
          .negative_eigenvalues = true,
          .short_conv = true,
          .seed_mini = {{"head_dim", option(4)}}};
}

}  // namespace memscript
