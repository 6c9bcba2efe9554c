#include "runtime/model/mixers/linear_attention.h"

#include "runtime/ops/common/impl.h"
#include "runtime/ops/linear/linear.h"
#include "runtime/ops/linear_attention/linear_attention.h"

namespace memscript {

namespace {

double read_eps(Options& options) {
  const double eps = options.number("eps", 1e-6, 0.0);
  if (!(eps > 0)) options.fail("eps", "must be > 0, got 0");
  return eps;
}

}  // namespace

LinearAttentionMixerImpl::LinearAttentionMixerImpl(const MixerContext& context, Options& options)
    : shape_(read_head_shape(context, options)),
      feature_map_(options.string("feature_map", "elu1", {"elu1", "relu"})),
      qk_norm_(options.boolean("qk_norm", false)),
      qkv_bias_(options.boolean("qkv_bias", false)),
      eps_(read_eps(options)),
      fused_(read_impl(options).fused) {
  qkv_ = QkvProjections(*this, context.d_model, shape_, qkv_bias_);
  output_ = register_output_projection(*this, shape_, context);
}

ops::Activation LinearAttentionMixerImpl::feature_map() const {
  return feature_map_ == "relu" ? ops::Activation::relu : ops::Activation::elu_plus_one;
}

MixerOutput LinearAttentionMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const auto [phi_q, phi_k, v] = project_heads(qkv_, x, shape_.heads, qk_norm_, feature_map());
  const torch::Tensor sum = state.empty() ? torch::Tensor() : state.tensors.at(0);
  const torch::Tensor normaliser = state.empty() ? torch::Tensor() : state.tensors.at(1);
  const ops::LinearAttentionResult out =
      fused_ ? ops::linear_attention(phi_q, phi_k, v, sum, normaliser, eps_)
             : ops::linear_attention_reference(phi_q, phi_k, v, sum, normaliser, eps_);
  return {ops::linear(output_, merge_heads(out.outputs)),
          {{out.sum, out.normaliser}, state.position + x.size(1)}};
}

nlohmann::json LinearAttentionMixerImpl::config() const {
  nlohmann::json config = {{"mixer", "linear_attention"}};
  config.update(shape_.config());
  config.update({{"feature_map", feature_map_},
                 {"qk_norm", qk_norm_},
                 {"eps", eps_},
                 {"impl", fused_ ? "fused" : "reference"}});
  if (qkv_bias_) config["qkv_bias"] = true;  // the default stays unwritten, as before
  return config;
}

Mixer make_linear_attention_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<LinearAttentionMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry linear_attention_entry() {
  return {.name = "linear_attention",
          .make = make_linear_attention_mixer,
          .recurrent = true,
          .negative_eigenvalues = false,
          .short_conv = true,
          .seed_mini = {{"head_dim", option(4)}, {"qkv_bias", option(true)}},
          .seed_mini_alone_decoder = {{"residual_positions", option("learned")}}};
}

}  // namespace memscript
