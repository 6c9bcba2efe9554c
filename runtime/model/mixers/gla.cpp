// Gated linear attention (Yang et al., "Gated Linear Attention Transformers with
// Hardware-Efficient Training", ICML 2024). Per head, with a gate per key column:
//
//   α_t = exp(logsigmoid(W_up W_down x_t + b) / τ)          [key_dim], τ = gate_normaliser
//   S_t = S_{t-1} diag(α_t) + v_t k_tᵀ                      [head_dim (values) x key_dim]
//   o_t = S_t q_t,  q_t scaled by key_dim^(−1/2)
//   y_t = W_out (RMSNorm(o_t per head) ⊙ swish(W_r x_t))
//
// The gate's projection is low-rank (d_model → gate_rank → key_dim per head), as the paper's;
// τ = 16 keeps α near 1 at initialisation, so memory fades slowly until training says
// otherwise. The recurrence is the delta-rule kernels' additive update with a decay per key
// column: ops::delta_rule with StateUpdate::additive, β = 1 and α of shape [.., key_dim].
// As flash-linear-attention's defaults, keys are half as wide as values.
//
// Options:
//   head_dim         width of each head's values (default d_model / heads; heads from the decoder)
//   key_dim          width of each head's keys and queries (default head_dim / 2, at least 1)
//   gate_rank        rank of the gate's projection (default 16)
//   gate_normaliser  τ above (default 16)
//   impl             "fused" (default): the kernels of kernels/delta_rule/; "reference": libtorch
//
// State: {S [batch, heads, head_dim, key_dim]}.

#include <cmath>

#include "runtime/model/heads.h"
#include "runtime/ops/common/impl.h"
#include "runtime/ops/delta_rule/delta_rule.h"

namespace memscript {

namespace {

class GlaMixerImpl : public MixerImpl {
 public:
  GlaMixerImpl(const MixerContext& context, Options& options)
      : shape_(read_head_shape(context, options)),
        key_dim_(options.integer("key_dim", std::max<int64_t>(1, shape_.head_dim / 2), {1})),
        gate_rank_(options.integer("gate_rank", 16, {1})),
        gate_normaliser_(options.number("gate_normaliser", 16.0)),
        fused_(read_impl(options).fused) {
    if (!(gate_normaliser_ > 0)) options.fail("gate_normaliser", "must be positive");
    const int64_t d = context.d_model, keys = shape_.heads * key_dim_;
    query_ = register_input_projection(*this, "query", d, keys, false);
    key_ = register_input_projection(*this, "key", d, keys, false);
    value_ = register_input_projection(*this, "value", d, shape_.width(), false);
    gate_down_ = register_input_projection(*this, "gate_down", d, gate_rank_, false);
    gate_up_ = register_input_projection(*this, "gate_up", gate_rank_, keys, true);
    output_gate_ = register_input_projection(*this, "output_gate", d, shape_.width(), false);
    output_ = register_output_projection(*this, shape_, context);
  }

  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override {
    const int64_t heads = shape_.heads;
    const torch::Tensor q =
        split_heads(ops::linear(query_, x), heads) / std::sqrt(double(key_dim_));
    const torch::Tensor k = split_heads(ops::linear(key_, x), heads);
    const torch::Tensor v = split_heads(ops::linear(value_, x), heads);
    const torch::Tensor gate_logits = ops::linear(gate_up_, ops::linear(gate_down_, x));
    const torch::Tensor alpha =
        split_heads(torch::exp(torch::log_sigmoid(gate_logits) / gate_normaliser_), heads);
    const torch::Tensor beta = torch::ones({x.size(0), heads, x.size(1)}, x.options());
    const torch::Tensor carried = state.empty() ? torch::Tensor() : state.tensors.at(0);
    const auto additive = ops::StateUpdate::additive;
    const ops::DeltaRuleResult out =
        fused_ ? ops::delta_rule(q, k, v, beta, alpha, carried, additive)
               : ops::delta_rule_reference(q, k, v, beta, alpha, carried, additive);
    const torch::Tensor gated =
        normalise_heads_and_gate(out.outputs, ops::linear(output_gate_, x, ops::Activation::silu));
    return {ops::linear(output_, gated), {{out.state}, state.position + x.size(1)}};
  }

  nlohmann::json config() const override {
    nlohmann::json config = {{"mixer", "gla"}};
    config.update(shape_.config());
    config.update({{"key_dim", key_dim_},
                   {"gate_rank", gate_rank_},
                   {"gate_normaliser", gate_normaliser_},
                   {"impl", fused_ ? "fused" : "reference"}});
    return config;
  }

 private:
  HeadShape shape_;
  int64_t key_dim_;
  int64_t gate_rank_;
  double gate_normaliser_;
  bool fused_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
  torch::nn::Linear gate_down_{nullptr}, gate_up_{nullptr}, output_gate_{nullptr};
  torch::nn::Linear output_{nullptr};
};

}  // namespace

Mixer make_gla_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<GlaMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry gla_entry() {
  return {.name = "gla",
          .make = make_gla_mixer,
          .recurrent = true,
          .negative_eigenvalues = false,
          .short_conv = true,
          .seed_mini = {{"head_dim", option(4)}}};
}

}  // namespace memscript
