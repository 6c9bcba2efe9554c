#pragma once

// Pieces shared by the multi-head mixers (linear_attention, deltanet, gated_deltanet): how many
// heads and how wide, the projections into and out of the heads, and the [batch, heads, length,
// width] layout their recurrences run in.

#include "runtime/model/mixer.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

struct HeadShape {
  int64_t heads;
  int64_t head_dim;

  int64_t width() const { return heads * head_dim; }
  nlohmann::json config() const { return {{"heads", heads}, {"head_dim", head_dim}}; }
};

// Heads come from the decoder (context.heads); option `head_dim` (default d_model / heads).
HeadShape read_head_shape(const MixerContext& context, Options& options);

// A projection from the mixer's input, registered on `owner`: normal(0, 0.02), zero bias.
torch::nn::Linear register_input_projection(torch::nn::Module& owner, const std::string& name,
                                            int64_t in, int64_t out, bool bias);

// Redraws a projection's weight Xavier-uniform, ±gain·sqrt(6 / (in + out)), and zeroes its bias:
// flash-linear-attention's layer init (gain 2^−2.5 there), in place of normal(0, 0.02).
void init_xavier_uniform(torch::nn::Linear& projection, double gain);

// The projection from the heads back into the residual stream, scaled for depth.
torch::nn::Linear register_output_projection(torch::nn::Module& owner, const HeadShape& shape,
                                             const MixerContext& context);

// The query, key and value projections of the linear-attention family, registered on the mixer
// as "query", "key" and "value"; with zero-initialised biases when `bias` (option `qkv_bias`).
struct QkvProjections {
  torch::nn::Linear query{nullptr};
  torch::nn::Linear key{nullptr};
  torch::nn::Linear value{nullptr};

  QkvProjections() = default;
  QkvProjections(torch::nn::Module& owner, int64_t d_model, const HeadShape& shape, bool bias);
};

struct HeadInputs {
  torch::Tensor q, k, v;  // each [batch, heads, length, head_dim]
};

// A projection's output [batch, length, heads * width] as heads [batch, heads, length, width],
// each of unit length when `normalise`.
torch::Tensor to_heads(const torch::Tensor& projected, int64_t heads, bool normalise);

// Projects x [batch, length, d_model] into heads: q and k of unit length along each head when
// `qk_norm`, then through `feature_map` (linear attention's φ).
HeadInputs project_heads(QkvProjections& projections, const torch::Tensor& x, int64_t heads,
                         bool qk_norm, ops::Activation feature_map = ops::Activation::none);

// [batch, length, heads * width] -> [batch, heads, length, width].
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads);
// [batch, heads, length, width] -> [batch, length, heads * width].
torch::Tensor merge_heads(const torch::Tensor& x);

// RetNet's and GLA's read-out: each head's outputs [batch, heads, length, width] RMS-normalised
// (the papers' GroupNorm without its affine), merged, times `gate` [batch, length, heads * width]
// (swish(W x), already applied).
torch::Tensor normalise_heads_and_gate(const torch::Tensor& outputs, const torch::Tensor& gate);

}  // namespace memscript
