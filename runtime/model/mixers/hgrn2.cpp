// HGRN2 (Qin et al., "HGRN2: Gated Linear RNNs with State Expansion", COLM 2024). HGRN's forget
// gate f decays the state and its complement 1 − f is the key, so what a channel forgets it
// writes; the state is expanded from a vector to `expand` key columns per head:
//
//   f_t = σ(W_f x_t),   q_t = swish(W_q x_t) · expand^(−1/2),   i_t = W_i x_t
//   S_t = S_{t-1} diag(f_t) + i_t (1 − f_t)ᵀ                [head_dim (values) x expand]
//   o_t = S_t q_t,   y_t = W_out RMSNorm(o_t)               (over the whole width, learned scale)
//
// as flash-linear-attention's HGRN2 layer (its q scale is GLA's default). The recurrence is gated
// linear attention's: ops::delta_rule with StateUpdate::additive, β = 1, α = f per key column and
// k = 1 − f. Left out: the HGRN models' lower bound on f that rises with depth; every layer has the
// first layer's bound, 0. stdlib/memscript/mixers/hgrn2.lua is the same mixer in the script, held
// to this one to 1e-9 in tests/bindings/test_lua_mixer.cpp.
//
// Options:
//   head_dim  width of each head's values (default d_model / heads; heads from the decoder)
//   expand    key columns per head (default head_dim)
//   impl      "fused" (default): the kernels of kernels/delta_rule/; "reference": libtorch
//
// State: {S [batch, heads, head_dim, expand]}.

#include <cmath>

#include "runtime/model/heads.h"
#include "runtime/ops/common/impl.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/layer_norm/layer_norm.h"

namespace memscript {

namespace {

constexpr double kNormEps = 1e-5;  // the script's ctx:rms_norm default, so the twins agree

class Hgrn2MixerImpl : public MixerImpl {
 public:
  Hgrn2MixerImpl(const MixerContext& context, Options& options)
      : shape_(read_head_shape(context, options)),
        expand_(options.integer("expand", shape_.head_dim, {1})),
        fused_(read_impl(options).fused) {
    const int64_t d = context.d_model, keys = shape_.heads * expand_;
    query_ = register_input_projection(*this, "query", d, keys, false);
    forget_ = register_input_projection(*this, "forget", d, keys, false);
    input_ = register_input_projection(*this, "input", d, shape_.width(), false);
    norm_weight_ = register_parameter("norm_weight", torch::ones({shape_.width()}));
    output_ = register_output_projection(*this, shape_, context);
  }

  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override {
    const int64_t heads = shape_.heads;
    const torch::Tensor q = split_heads(ops::linear(query_, x, ops::Activation::silu), heads) /
                            std::sqrt(double(expand_));
    const torch::Tensor f = split_heads(torch::sigmoid(ops::linear(forget_, x)), heads);
    const torch::Tensor i = split_heads(ops::linear(input_, x), heads);
    const torch::Tensor beta = torch::ones({x.size(0), heads, x.size(1)}, x.options());
    const torch::Tensor carried = state.empty() ? torch::Tensor() : state.tensors.at(0);
    const auto additive = ops::StateUpdate::additive;
    const ops::DeltaRuleResult out =
        fused_ ? ops::delta_rule(q, 1 - f, i, beta, f, carried, additive)
               : ops::delta_rule_reference(q, 1 - f, i, beta, f, carried, additive);
    const torch::Tensor normalised =
        ops::rms_norm(merge_heads(out.outputs), norm_weight_, kNormEps);
    return {ops::linear(output_, normalised), {{out.state}, state.position + x.size(1)}};
  }

  nlohmann::json config() const override {
    nlohmann::json config = {{"mixer", "hgrn2"}};
    config.update(shape_.config());
    config.update({{"expand", expand_}, {"impl", fused_ ? "fused" : "reference"}});
    return config;
  }

 private:
  HeadShape shape_;
  int64_t expand_;
  bool fused_;
  torch::nn::Linear query_{nullptr}, forget_{nullptr}, input_{nullptr}, output_{nullptr};
  torch::Tensor norm_weight_;
};

}  // namespace

Mixer make_hgrn2_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<Hgrn2MixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry hgrn2_entry() {
  return {.name = "hgrn2",
          .make = make_hgrn2_mixer,
          .recurrent = true,
          .negative_eigenvalues = false,
          .short_conv = false,
          .seed_mini = {{"head_dim", option(4)}}};
}

}  // namespace memscript
