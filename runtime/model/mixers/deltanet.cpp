#include "runtime/model/mixers/deltanet.h"

#include "runtime/model/fused/delta_rule_op.h"
#include "runtime/model/fused/impl.h"
#include "runtime/model/fused/launch.h"
#include "runtime/model/fused/linear.h"

namespace memscript {

torch::Tensor delta_rule_step(const torch::Tensor& state, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& beta,
                              const torch::Tensor& alpha) {
  const torch::Tensor decayed = alpha.defined() ? state * alpha.unsqueeze(-1).unsqueeze(-1) : state;
  // α S (I − β k kᵀ) + β v kᵀ = α S + β (v − α S k) kᵀ: a rank-one correction, no dk x dk matrix.
  const torch::Tensor recalled = torch::matmul(decayed, k.unsqueeze(-1)).squeeze(-1);
  const torch::Tensor correction = beta.unsqueeze(-1) * (v - recalled);
  return decayed + correction.unsqueeze(-1) * k.unsqueeze(-2);
}

DeltaRuleOutput delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& beta, const torch::Tensor& alpha,
                           const torch::Tensor& state) {
  torch::Tensor s = state.defined()
                        ? state
                        : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  std::vector<torch::Tensor> outputs;
  for (int64_t t = 0; t < v.size(2); ++t) {
    s = delta_rule_step(s, k.select(2, t), v.select(2, t), beta.select(2, t),
                        alpha.defined() ? alpha.select(2, t) : torch::Tensor());
    outputs.push_back(torch::matmul(s, q.select(2, t).unsqueeze(-1)).squeeze(-1));
  }
  return {torch::stack(outputs, 2), s};
}

namespace {
DeltaRuleOutput fused_delta_rule(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const torch::Tensor& beta,
                                 const torch::Tensor& alpha, const torch::Tensor& state) {
  fused::DeltaRuleResult out = fused::delta_rule(q, k, v, beta, alpha, state);
  return {out.outputs, out.state};
}
}  // namespace

DeltaNetMixerImpl::DeltaNetMixerImpl(const MixerContext& context, Options& options)
    : DeltaNetMixerImpl("deltanet", context, options) {}

DeltaNetMixerImpl::DeltaNetMixerImpl(const std::string& name, const MixerContext& context,
                                     Options& options)
    : name_(name),
      shape_(read_head_shape(context, options)),
      negative_eigenvalues_(options.boolean("negative_eigenvalues", false)),
      qk_norm_(options.boolean("qk_norm", true)),
      qkv_bias_(options.boolean("qkv_bias", false)),
      fused_(read_impl(options).fused) {
  qkv_ = QkvProjections(*this, context.d_model, shape_, qkv_bias_);
  // A bias lets each head learn how strongly it writes regardless of the token.
  beta_ = register_input_projection(*this, "beta", context.d_model, shape_.heads, true);
  output_ = register_output_projection(*this, shape_, context);
}

torch::Tensor DeltaNetMixerImpl::write_strength(const torch::Tensor& x) {
  const torch::Tensor beta = fused::linear(beta_, x, fused::Activation::sigmoid).transpose(1, 2);
  return negative_eigenvalues_ ? 2 * beta : beta;
}

torch::Tensor DeltaNetMixerImpl::decay(const torch::Tensor& /*x*/) { return {}; }

MixerOutput DeltaNetMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const auto [q, k, v] = project_heads(qkv_, x, shape_.heads, qk_norm_);
  const torch::Tensor carried = state.empty() ? torch::Tensor() : state.tensors.at(0);
  const torch::Tensor beta = write_strength(x), alpha = decay(x);
  const DeltaRuleOutput out = fused_ && fused::kernels_take(q)
                                  ? fused_delta_rule(q, k, v, beta, alpha, carried)
                                  : delta_rule(q, k, v, beta, alpha, carried);
  return {fused::linear(output_, merge_heads(out.outputs)),
          {{out.state}, state.position + x.size(1)}};
}

nlohmann::json DeltaNetMixerImpl::config() const {
  nlohmann::json config = {{"mixer", name_}};
  config.update(shape_.config());
  config.update({{"negative_eigenvalues", negative_eigenvalues_},
                 {"qk_norm", qk_norm_},
                 {"impl", fused_ ? "fused" : "reference"}});
  if (qkv_bias_) config["qkv_bias"] = true;  // the default stays unwritten, as before
  return config;
}

Mixer make_deltanet_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<DeltaNetMixerImpl>(context, options);
}

}  // namespace memscript
