#include "runtime/model/mixers/heads.h"
#include "runtime/model/fused/linear.h"

namespace memscript {

HeadShape read_head_shape(const MixerContext& context, Options& options) {
  const int64_t head_dim = options.integer(
      "head_dim", std::max<int64_t>(1, context.d_model / context.heads), {.min = 1});
  return {context.heads, head_dim};
}

torch::nn::Linear register_input_projection(torch::nn::Module& owner, const std::string& name,
                                            int64_t in, int64_t out, bool bias) {
  torch::nn::Linear projection =
      owner.register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)));
  torch::NoGradGuard no_grad;
  projection->weight.normal_(0.0, 0.02);
  if (bias) projection->bias.zero_();
  return projection;
}

torch::nn::Linear register_output_projection(torch::nn::Module& owner, const HeadShape& shape,
                                             const MixerContext& context) {
  torch::nn::Linear projection = owner.register_module(
      "output", torch::nn::Linear(torch::nn::LinearOptions(shape.width(), context.d_model)));
  init_output_projection(projection, context.layers);
  return projection;
}

torch::Tensor l2_normalize(const torch::Tensor& x) {
  return torch::nn::functional::normalize(x, torch::nn::functional::NormalizeFuncOptions().dim(-1));
}

torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  return x.unflatten(-1, {heads, -1}).transpose(1, 2);
}

torch::Tensor merge_heads(const torch::Tensor& x) { return x.transpose(1, 2).flatten(2); }

QkvProjections::QkvProjections(torch::nn::Module& owner, int64_t d_model, const HeadShape& shape)
    : query(register_input_projection(owner, "query", d_model, shape.width(), false)),
      key(register_input_projection(owner, "key", d_model, shape.width(), false)),
      value(register_input_projection(owner, "value", d_model, shape.width(), false)) {}

HeadInputs project_heads(QkvProjections& projections, const torch::Tensor& x, int64_t heads,
                         bool qk_norm) {
  HeadInputs out{split_heads(fused::linear(projections.query, x), heads),
                 split_heads(fused::linear(projections.key, x), heads),
                 split_heads(fused::linear(projections.value, x), heads)};
  if (qk_norm) {
    out.q = l2_normalize(out.q);
    out.k = l2_normalize(out.k);
  }
  return out;
}

}  // namespace memscript
