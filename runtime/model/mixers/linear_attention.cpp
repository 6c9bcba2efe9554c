#include "runtime/model/mixers/linear_attention.h"

#include "runtime/model/fused/impl.h"
#include "runtime/model/fused/launch.h"
#include "runtime/model/fused/linear.h"
#include "runtime/model/fused/linear_attention_op.h"

namespace memscript {

namespace {

// Tokens per block of linear_attention(): big enough that the block's matrix products beat a
// per-token loop, small enough that its [block x block] scores stay cheap.
constexpr int64_t kBlock = 64;

double read_eps(Options& options) {
  const double eps = options.number("eps", 1e-6, 0.0);
  if (!(eps > 0)) options.fail("eps", "must be > 0, got 0");
  return eps;
}

LinearAttentionState initial_state(const torch::Tensor& v, int64_t dk) {
  const int64_t batch = v.size(0), heads = v.size(1), dv = v.size(3);
  return {torch::zeros({batch, heads, dk, dv}, v.options()),
          torch::zeros({batch, heads, dk}, v.options())};
}

// One block: what the carried state contributes, plus the causal sum within the block.
LinearAttentionOutput attend_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                   const torch::Tensor& v, const LinearAttentionState& state,
                                   double eps) {
  const torch::Tensor scores = torch::matmul(phi_q, phi_k.transpose(-1, -2)).tril();
  const torch::Tensor numerator = torch::matmul(phi_q, state.sum) + torch::matmul(scores, v);
  const torch::Tensor denominator =
      torch::matmul(phi_q, state.normaliser.unsqueeze(-1)) + scores.sum(-1, true) + eps;
  return {numerator / denominator,
          {state.sum + torch::matmul(phi_k.transpose(-1, -2), v), state.normaliser + phi_k.sum(2)}};
}

LinearAttentionOutput fused_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                             const torch::Tensor& v,
                                             const LinearAttentionState& state, double eps) {
  fused::LinearAttentionResult out =
      fused::linear_attention(phi_q, phi_k, v, state.sum, state.normaliser, eps);
  return {out.outputs, {out.sum, out.normaliser}};
}

}  // namespace

LinearAttentionOutput linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       const torch::Tensor& v, const LinearAttentionState& state,
                                       double eps) {
  LinearAttentionState carried = state.sum.defined() ? state : initial_state(v, phi_k.size(3));
  std::vector<torch::Tensor> outputs;
  for (int64_t start = 0; start < v.size(2); start += kBlock) {
    const int64_t length = std::min(kBlock, v.size(2) - start);
    LinearAttentionOutput block =
        attend_block(phi_q.narrow(2, start, length), phi_k.narrow(2, start, length),
                     v.narrow(2, start, length), carried, eps);
    outputs.push_back(block.outputs);
    carried = block.state;
  }
  return {torch::cat(outputs, 2), carried};
}

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

fused::Activation LinearAttentionMixerImpl::feature_map() const {
  return feature_map_ == "relu" ? fused::Activation::relu : fused::Activation::elu_plus_one;
}

MixerOutput LinearAttentionMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const auto [phi_q, phi_k, v] = project_heads(qkv_, x, shape_.heads, qk_norm_, feature_map());
  LinearAttentionState carried;
  if (!state.empty()) carried = {state.tensors.at(0), state.tensors.at(1)};
  const LinearAttentionOutput out = fused_ && fused::kernels_take(phi_q)
                                        ? fused_linear_attention(phi_q, phi_k, v, carried, eps_)
                                        : linear_attention(phi_q, phi_k, v, carried, eps_);
  return {fused::linear(output_, merge_heads(out.outputs)),
          {{out.state.sum, out.state.normaliser}, state.position + x.size(1)}};
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

}  // namespace memscript
