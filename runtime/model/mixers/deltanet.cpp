#include "runtime/model/mixers/deltanet.h"

#include "runtime/ops/causal_conv/causal_conv.h"
#include "runtime/ops/common/impl.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

namespace {

// qkv_conv's K, 0 when absent. The decoder's short_conv convolves the same layer's input: two
// placements of one idea, so one of them.
int64_t read_qkv_conv(Options& options) {
  if (!options.has("qkv_conv")) return 0;
  if (options.has("short_conv"))
    options.fail("qkv_conv", "and short_conv are two placements of one convolution: give one");
  return options.integer("qkv_conv", 0, {.min = 2, .max = 64});
}

// xavier_gain, 0 when absent (the projections keep normal(0, 0.02)).
double read_xavier_gain(Options& options) {
  if (!options.has("xavier_gain")) return 0;
  const double gain = options.number("xavier_gain", 0, 0, 100);
  if (gain == 0)
    options.fail("xavier_gain", "= 0 would zero every projection: give a gain above 0");
  return gain;
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
      o_norm_(options.boolean("o_norm", false)),
      qkv_conv_(read_qkv_conv(options)),
      beta_bias_(options.boolean("beta_bias", true)),
      xavier_gain_(read_xavier_gain(options)),
      fused_(read_impl(options).fused) {
  qkv_ = QkvProjections(*this, context.d_model, shape_, qkv_bias_);
  const int64_t width = shape_.width();
  for (const char* conv : {"query_conv", "key_conv", "value_conv"}) {
    if (qkv_conv_ > 0)
      qkv_convs_.push_back(register_module(
          conv, torch::nn::Conv1d(
                    torch::nn::Conv1dOptions(width, width, qkv_conv_).groups(width).bias(false))));
  }
  // A bias (beta_bias, on by default) lets each head learn how strongly it writes regardless of
  // the token.
  beta_ = register_input_projection(*this, "beta", context.d_model, shape_.heads, beta_bias_);
  if (o_norm_) output_norm_ = register_parameter("output_norm", torch::ones({shape_.head_dim}));
  output_ = register_output_projection(*this, shape_, context);
  if (xavier_gain_ > 0) {
    for (torch::nn::Linear* projection : {&qkv_.query, &qkv_.key, &qkv_.value, &beta_, &output_})
      init_xavier_uniform(*projection, xavier_gain_);
  }
}

torch::Tensor DeltaNetMixerImpl::write_strength(const torch::Tensor& x) {
  const torch::Tensor beta = ops::linear(beta_, x, ops::Activation::sigmoid).transpose(1, 2);
  return negative_eigenvalues_ ? 2 * beta : beta;
}

torch::Tensor DeltaNetMixerImpl::decay(const torch::Tensor& /*x*/) { return {}; }

HeadInputs DeltaNetMixerImpl::project(const torch::Tensor& x, const MixerState& state,
                                      std::vector<torch::Tensor>& windows) {
  if (qkv_conv_ == 0) return project_heads(qkv_, x, shape_.heads, qk_norm_);
  const torch::nn::Linear* projections[] = {&qkv_.query, &qkv_.key, &qkv_.value};
  // fla's convolutions have no bias; the fused kernel takes one, so it gets zeros.
  const torch::Tensor no_bias = torch::zeros({shape_.width()}, x.options());
  torch::Tensor convolved[3];
  for (size_t i = 0; i < 3; ++i) {
    const torch::Tensor window = state.empty() ? torch::Tensor() : state.tensors.at(1 + i);
    const torch::Tensor projected = ops::linear(*projections[i], x);
    const torch::Tensor& weight = qkv_convs_[i]->weight;
    const ops::CausalConvResult out =
        fused_ ? ops::causal_conv_silu(projected, window, weight, no_bias)
               : ops::causal_conv_silu_reference(projected, window, weight, no_bias);
    convolved[i] = out.u;
    windows.push_back(out.window_after);
  }
  return {to_heads(convolved[0], shape_.heads, qk_norm_),
          to_heads(convolved[1], shape_.heads, qk_norm_),
          to_heads(convolved[2], shape_.heads, false)};
}

MixerOutput DeltaNetMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  std::vector<torch::Tensor> windows;
  const auto [q, k, v] = project(x, state, windows);
  const torch::Tensor carried = state.empty() ? torch::Tensor() : state.tensors.at(0);
  const torch::Tensor beta = write_strength(x), alpha = decay(x);
  const ops::DeltaRuleResult out = fused_
                                       ? ops::delta_rule(q, k, v, beta, alpha, carried)
                                       : ops::delta_rule_reference(q, k, v, beta, alpha, carried);
  // flash-linear-attention's o_norm, with its default eps.
  const torch::Tensor outputs =
      o_norm_ ? ops::rms_norm(out.outputs, output_norm_, 1e-5) : out.outputs;
  std::vector<torch::Tensor> next = {out.state};
  next.insert(next.end(), windows.begin(), windows.end());
  return {ops::linear(output_, merge_heads(outputs)), {next, state.position + x.size(1)}};
}

nlohmann::json DeltaNetMixerImpl::config() const {
  nlohmann::json config = {{"mixer", name_}};
  config.update(shape_.config());
  config.update({{"negative_eigenvalues", negative_eigenvalues_},
                 {"qk_norm", qk_norm_},
                 {"impl", fused_ ? "fused" : "reference"}});
  if (qkv_bias_) config["qkv_bias"] = true;  // the default stays unwritten, as before
  if (o_norm_) config["o_norm"] = true;      // as qkv_bias: earlier runs' configs still match
  if (qkv_conv_ > 0) config["qkv_conv"] = qkv_conv_;
  if (!beta_bias_) config["beta_bias"] = false;
  if (xavier_gain_ > 0) config["xavier_gain"] = xavier_gain_;
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
