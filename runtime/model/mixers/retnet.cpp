// RetNet's retention (Sun et al., "Retentive Network: A Successor to Transformer for Large
// Language Models", 2023). Per head h, with a fixed decay γ_h = 1 − 2^(−5−h):
//
//   S_t = γ_h S_{t-1} + v_t k_tᵀ      [head_dim x head_dim],   k_t scaled by head_dim^(−1/2)
//   o_t = S_t q_t
//
// equivalently o_t = Σ_{s≤t} γ_h^(t−s) (q_t·k_s) v_s, the paper's parallel form. Each head's
// output is RMS-normalised (the paper's GroupNorm, without its affine), gated by swish(W_g x)
// and projected back to d_model. The recurrence is the additive member of the delta-rule
// kernels: ops::delta_rule with StateUpdate::additive, β = 1 and α = γ_h.
//
// Unlike the paper, q and k get no xPos rotation: the decay alone tells the tokens' order.
//
// Options:
//   head_dim  width of each head (default d_model / heads; heads from the decoder)
//   qkv_bias  biases on the q, k and v projections (default false)
//   impl      "fused" (default): the kernels of kernels/delta_rule/; "reference": libtorch ops
//
// State: {S [batch, heads, head_dim (values), head_dim (keys)]}.

#include <cmath>

#include "runtime/model/heads.h"
#include "runtime/ops/common/impl.h"
#include "runtime/ops/delta_rule/delta_rule.h"

namespace memscript {

namespace {

class RetNetMixerImpl : public MixerImpl {
 public:
  RetNetMixerImpl(const MixerContext& context, Options& options)
      : shape_(read_head_shape(context, options)),
        qkv_bias_(options.boolean("qkv_bias", false)),
        fused_(read_impl(options).fused) {
    qkv_ = QkvProjections(*this, context.d_model, shape_, qkv_bias_);
    gate_ = register_input_projection(*this, "gate", context.d_model, shape_.width(), false);
    output_ = register_output_projection(*this, shape_, context);
  }

  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override {
    auto [q, k, v] = project_heads(qkv_, x, shape_.heads, false);
    k = k * (1.0 / std::sqrt(double(shape_.head_dim)));
    const int64_t batch = x.size(0), length = x.size(1);
    const torch::Tensor gamma = 1 - torch::pow(2.0, -5 - torch::arange(shape_.heads, x.options()));
    const torch::Tensor alpha =
        gamma.view({1, shape_.heads, 1}).expand({batch, shape_.heads, length}).contiguous();
    const torch::Tensor beta = torch::ones_like(alpha);
    const torch::Tensor carried = state.empty() ? torch::Tensor() : state.tensors.at(0);
    const auto additive = ops::StateUpdate::additive;
    const ops::DeltaRuleResult out =
        fused_ ? ops::delta_rule(q, k, v, beta, alpha, carried, additive)
               : ops::delta_rule_reference(q, k, v, beta, alpha, carried, additive);
    const torch::Tensor gated =
        normalise_heads_and_gate(out.outputs, ops::linear(gate_, x, ops::Activation::silu));
    return {ops::linear(output_, gated), {{out.state}, state.position + length}};
  }

  nlohmann::json config() const override {
    nlohmann::json config = {{"mixer", "retnet"}};
    config.update(shape_.config());
    config.update({{"qkv_bias", qkv_bias_}, {"impl", fused_ ? "fused" : "reference"}});
    return config;
  }

 private:
  HeadShape shape_;
  bool qkv_bias_;
  bool fused_;
  QkvProjections qkv_;
  torch::nn::Linear gate_{nullptr}, output_{nullptr};
};

}  // namespace

Mixer make_retnet_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<RetNetMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry retnet_entry() {
  return {.name = "retnet",
          .make = make_retnet_mixer,
          .recurrent = true,
          .negative_eigenvalues = false,
          .short_conv = false,
          .seed_mini = {{"head_dim", option(4)}}};
}

}  // namespace memscript
