#include "runtime/model/heads.h"
#include "runtime/ops/l2_normalize/l2_normalize.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"

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

void init_xavier_uniform(torch::nn::Linear& projection, double gain) {
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(projection->weight, gain);
  if (projection->bias.defined()) projection->bias.zero_();
}

torch::nn::Linear register_output_projection(torch::nn::Module& owner, const HeadShape& shape,
                                             const MixerContext& context) {
  torch::nn::Linear projection = owner.register_module(
      "output", torch::nn::Linear(torch::nn::LinearOptions(shape.width(), context.d_model)));
  init_output_projection(projection, context.layers);
  return projection;
}

torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  return x.unflatten(-1, {heads, -1}).transpose(1, 2);
}

torch::Tensor merge_heads(const torch::Tensor& x) { return x.transpose(1, 2).flatten(2); }

QkvProjections::QkvProjections(torch::nn::Module& owner, int64_t d_model, const HeadShape& shape,
                               bool bias)
    : query(register_input_projection(owner, "query", d_model, shape.width(), bias)),
      key(register_input_projection(owner, "key", d_model, shape.width(), bias)),
      value(register_input_projection(owner, "value", d_model, shape.width(), bias)) {}

torch::Tensor to_heads(const torch::Tensor& projected, int64_t heads, bool normalise) {
  if (!normalise) return split_heads(projected, heads);
  // Normalized on the [batch, length, heads, head_dim] view, whose rows are contiguous.
  return ops::l2_normalize(projected.unflatten(-1, {heads, -1})).transpose(1, 2);
}

namespace {

// One of q, k: [batch, heads, length, head_dim], normalized per head and mapped by φ.
torch::Tensor project_query_or_key(const torch::nn::Linear& projection, const torch::Tensor& x,
                                   int64_t heads, bool qk_norm, ops::Activation feature_map) {
  if (!qk_norm) return split_heads(ops::linear(projection, x, feature_map), heads);
  return ops::activation(to_heads(ops::linear(projection, x), heads, true), feature_map);
}

}  // namespace

HeadInputs project_heads(QkvProjections& projections, const torch::Tensor& x, int64_t heads,
                         bool qk_norm, ops::Activation feature_map) {
  return {project_query_or_key(projections.query, x, heads, qk_norm, feature_map),
          project_query_or_key(projections.key, x, heads, qk_norm, feature_map),
          split_heads(ops::linear(projections.value, x), heads)};
}

torch::Tensor normalise_heads_and_gate(const torch::Tensor& outputs, const torch::Tensor& gate) {
  return merge_heads(ops::rms_norm(outputs, torch::Tensor(), 1e-6)) * gate;
}

}  // namespace memscript
