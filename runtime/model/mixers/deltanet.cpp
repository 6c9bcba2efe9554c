#include "runtime/model/mixers/deltanet.h"

#include "runtime/ops/common/impl.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

DeltaNetMixerImpl::DeltaNetMixerImpl(const MixerContext& context, Options& options)
    : DeltaNetMixerImpl("deltanet", context, options) {}

DeltaNetMixerImpl::DeltaNetMixerImpl(const std::string& name, const MixerContext& context,
                                     Options& options)
    : name_(name),
      shape_(read_head_shape(context, options)),
      negative_eigenvalues_(options.boolean("negative_eigenvalues", false)),
      qk_norm_(options.boolean("qk_norm", true)),
      qkv_bias_(options.boolean("qkv_bias", false)),
      o_norm_(options.boolean("o_norm", false)),
      fused_(read_impl(options).fused) {
  qkv_ = QkvProjections(*this, context.d_model, shape_, qkv_bias_);
  // A bias lets each head learn how strongly it writes regardless of the token.
  beta_ = register_input_projection(*this, "beta", context.d_model, shape_.heads, true);
  if (o_norm_) output_norm_ = register_parameter("output_norm", torch::ones({shape_.head_dim}));
  output_ = register_output_projection(*this, shape_, context);
}

torch::Tensor DeltaNetMixerImpl::write_strength(const torch::Tensor& x) {
  const torch::Tensor beta = ops::linear(beta_, x, ops::Activation::sigmoid).transpose(1, 2);
  return negative_eigenvalues_ ? 2 * beta : beta;
}

torch::Tensor DeltaNetMixerImpl::decay(const torch::Tensor& /*x*/) { return {}; }

MixerOutput DeltaNetMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const auto [q, k, v] = project_heads(qkv_, x, shape_.heads, qk_norm_);
  const torch::Tensor carried = state.empty() ? torch::Tensor() : state.tensors.at(0);
  const torch::Tensor beta = write_strength(x), alpha = decay(x);
  const ops::DeltaRuleResult out = fused_
                                       ? ops::delta_rule(q, k, v, beta, alpha, carried)
                                       : ops::delta_rule_reference(q, k, v, beta, alpha, carried);
  // flash-linear-attention's o_norm, with its default eps.
  const torch::Tensor outputs =
      o_norm_ ? ops::rms_norm(out.outputs, output_norm_, 1e-5) : out.outputs;
  return {ops::linear(output_, merge_heads(outputs)), {{out.state}, state.position + x.size(1)}};
}

nlohmann::json DeltaNetMixerImpl::config() const {
  nlohmann::json config = {{"mixer", name_}};
  config.update(shape_.config());
  config.update({{"negative_eigenvalues", negative_eigenvalues_},
                 {"qk_norm", qk_norm_},
                 {"impl", fused_ ? "fused" : "reference"}});
  if (qkv_bias_) config["qkv_bias"] = true;  // the default stays unwritten, as before
  if (o_norm_) config["o_norm"] = true;      // as qkv_bias: earlier runs' configs still match
  return config;
}

Mixer make_deltanet_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<DeltaNetMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry deltanet_entry() {
  return {.name = "deltanet",
          .make = make_deltanet_mixer,
          .recurrent = true,
          .negative_eigenvalues = true,
          .short_conv = true,
          .seed_mini = {{"head_dim", option(4)}, {"qkv_bias", option(true)}},
          .seed_mini_alone_decoder = {{"residual_positions", option("learned")}}};
}

}  // namespace memscript
