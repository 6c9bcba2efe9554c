#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// Causal multi-head softmax attention (the GPT mixer).
//
//   u = x + P[position .. position + L)        learned or sinusoidal positions, else u = x
//   q, k, v = split(W_qkv u + b)               each [B, H, L, head_dim]
//   q, k = rope(q), rope(k)                    positions = "rope" only
//   o = softmax(q kᵀ / sqrt(head_dim) + B + M) v
//                                              M = 0 where key <= query, −inf after;
//                                              B = −m_h (query − key), positions = "alibi" only
//   y = W_o concat_heads(o) + b_o
//
// positions = "relative" (Transformer-XL, Dai et al. 2019, as Delétang et al.'s transformer has
// it) replaces the scores: with d = query − key, R_d the sin/cos table's row d (width d_model),
//   s = ((q + u_h) · k + (q + w_h) · (W_r R_d)_h) / sqrt(head_dim)
// u, w [heads, head_dim] learned biases, W_r a learned projection without bias. It runs
// composed libtorch ops (whatever impl says): O(queries · keys) memory per head.
//
// Positions belong to this mixer, not to the decoder: they are added to the mixer's own input
// (after the block's LayerNorm) and feed only q, k and v, never the residual stream. Each gpt
// layer so has its own table, and a hybrid such as {deltanet, gpt} needs no decoder option to
// give its attention layers a sense of order.
//
// Options:
//   heads       the decoder's heads
//   head_dim    per-head width (default d_model / heads)
//   positions   "none" | "learned" | "sinusoidal" | "rope" | "alibi" | "relative"
//               (default "learned").
//               "alibi" (Press et al.) adds no table: each head h penalizes a key by its
//               distance to the query, slope m_h from ops::alibi_slopes(heads), as in Press et
//               al.'s code and Delétang et al.'s transformer (which, being an encoder, also
//               biases later keys; memscript's mixer is causal and sees none).
//               "relative": Transformer-XL's relative scores, above.
//   max_length  rows of the learned table (default 1024); running past it is an error.
//               The table starts at normal(0, 1/sqrt(2)), the sinusoidal table's scale, since
//               it is added to a unit-scale LayerNorm output rather than to an embedding.
//   rope_base   the rotary frequency base (default 10000)
//   impl        "fused" (default): ops::causal_attention (kernels/causal_attention/ on the CPU
//               up to head_dim 8, libtorch's scaled_dot_product_attention otherwise);
//               "reference": ops::causal_attention_reference, softmax(q kᵀ / sqrt(d) + B + M) v
//               from composed ops, the oracle
//
// State: {k, v}, each [B, H, T, head_dim], the keys and values of the T tokens seen so far
// (after rope), plus MixerState::position = T, where the next chunk's positions start.
class GptMixerImpl : public MixerImpl {
 public:
  GptMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  torch::Tensor add_positions(const torch::Tensor& x, int64_t position) const;
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k,
                       const torch::Tensor& v) const;
  torch::Tensor attend_relative(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v) const;
  void check_length(int64_t position, int64_t length) const;

  std::string where_;  // the options' context, to prefix errors raised in forward()
  int64_t d_model_;
  int64_t heads_;
  int64_t head_dim_;
  std::string positions_;
  int64_t max_length_;
  double rope_base_;
  Impl impl_;
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear output_{nullptr};
  torch::Tensor table_;   // learned positions [max_length, d_model]; undefined otherwise
  torch::Tensor slopes_;  // ALiBi's slopes [heads], float64 on the CPU; undefined otherwise
  // positions = "relative": u, w [heads, head_dim] and W_r; undefined otherwise.
  torch::Tensor content_bias_, position_bias_;
  torch::nn::Linear relative_{nullptr};
};

Mixer make_gpt_mixer(const MixerContext& context, Options& options);

// The fixed sin/cos table of Vaswani et al. for positions [position, position + length):
// P[p, 2i] = sin(p / 10000^(2i/width)), P[p, 2i+1] = cos(same); [length, width].
torch::Tensor sinusoidal_positions(int64_t position, int64_t length, int64_t width,
                                   const torch::TensorOptions& options);

// Rotary embedding, rotate-half convention: the pair (x_i, x_{i+d/2}) is rotated by the angle
// p · base^(−2i/d), with p = position + index along dim 2 of x [B, H, L, d] (d even).
torch::Tensor apply_rope(const torch::Tensor& x, int64_t position, double base);

}  // namespace memscript
