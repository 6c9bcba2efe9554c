#pragma once

// DeltaNet (Schlag et al., "Linear Transformers Are Secretly Fast Weight Programmers", 2021;
// Yang et al., "Parallelizing Linear Transformers with the Delta Rule over Sequence Length",
// 2024). Per head, a fast-weight matrix S is corrected toward each new key-value pair:
//
//   S_t = S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ      [head_dim x head_dim]
//   o_t = S_t q_t
//
// with q_t, k_t L2-normalised per head and β_t = σ(w_βᵀ x_t + b_β) in (0, 1), one per head and
// token; the heads are concatenated and projected back to d_model.
//
// With ‖k_t‖ = 1 the transition I − β_t k_t k_tᵀ has eigenvalue 1 − β_t along k_t and 1
// elsewhere. β in (0, 1) keeps that eigenvalue in (0, 1); `negative_eigenvalues` doubles β to
// 2σ(·) in (0, 2), so it ranges over (−1, 1) — what lets the recurrence flip a sign per token
// and track parity (Grazzi et al., "Unlocking State-Tracking in Linear RNNs Through Negative
// Eigenvalues", 2025).
//
// Options:
//   head_dim              width of each head (default d_model / heads; heads from the decoder)
//   negative_eigenvalues  β = 2σ(·) in (0, 2) instead of σ(·) in (0, 1) (default false)
//   impl                  "fused" (default): ops::delta_rule, the kernels of kernels/delta_rule/;
//                         "reference": ops::delta_rule_reference, token by token in libtorch ops
//   qk_norm               L2-normalise q and k (default true). Turning it off leaves ‖k‖ free,
//                         so the eigenvalue 1 − β‖k‖² is no longer bounded by 1 in magnitude and
//                         S can grow without limit, most quickly with negative_eigenvalues.
//   o_norm                RMS-normalise each head's output o_t over its head_dim values, times a
//                         learned scale per value channel shared by the heads, before the output
//                         projection: flash-linear-attention's DeltaNet layer (its `o_norm`,
//                         eps 1e-5), which Grazzi et al. train. Default false.
//   qkv_conv              K >= 2: a causal depthwise convolution of K (no bias) and a SiLU on
//                         each of q, k and v after its projection, before q and k are
//                         normalised: flash-linear-attention's `use_short_conv` layout. The
//                         decoder's `short_conv` is the other placement (once, on the mixer's
//                         input); a layer takes one or the other. Default 0: none.
//   beta_bias             a bias on β's projection (default true; flash-linear-attention's has
//                         none).
//   xavier_gain           g > 0: draw the layer's projections (q, k, v, β, the output and
//                         gated_deltanet's α) Xavier-uniform with gain g, biases zero, in place
//                         of normal(0, 0.02) and the output's 0.02 / sqrt(2 · layers): the init
//                         of flash-linear-attention's layer, g = 2^−2.5 ≈ 0.177 there. Default:
//                         absent.
//
// State: {S [batch, heads, head_dim (values), head_dim (keys)]}, then with qkv_conv the three
// convolutions' windows {q, k, v: [batch, heads * head_dim, K − 1]}.

#include "runtime/model/heads.h"

namespace memscript {

class DeltaNetMixerImpl : public MixerImpl {
 public:
  DeltaNetMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

  // β for every head and token: [batch, heads, length], in (0, 1), or (0, 2) with
  // negative_eigenvalues.
  torch::Tensor write_strength(const torch::Tensor& x);

 protected:
  // For variants that add to the recurrence (gated_deltanet) under their own name.
  DeltaNetMixerImpl(const std::string& name, const MixerContext& context, Options& options);

  // α for every head and token, [batch, heads, length]; undefined means no decay (α = 1).
  virtual torch::Tensor decay(const torch::Tensor& x);

  const HeadShape& shape() const { return shape_; }
  double xavier_gain() const { return xavier_gain_; }

 private:
  // q, k, v [batch, heads, length, head_dim] from x; with qkv_conv through the convolutions,
  // from the windows in `state` (after S), whose successors are appended to `windows`.
  HeadInputs project(const torch::Tensor& x, const MixerState& state,
                     std::vector<torch::Tensor>& windows);

  std::string name_;
  HeadShape shape_;
  bool negative_eigenvalues_;
  bool qk_norm_;
  bool qkv_bias_;
  bool o_norm_;
  int64_t qkv_conv_;
  bool beta_bias_;
  double xavier_gain_;
  bool fused_;
  QkvProjections qkv_;
  std::vector<torch::nn::Conv1d> qkv_convs_;  // query, key, value; with qkv_conv
  torch::nn::Linear beta_{nullptr}, output_{nullptr};
  torch::Tensor output_norm_;  // [head_dim], with o_norm
};

Mixer make_deltanet_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
