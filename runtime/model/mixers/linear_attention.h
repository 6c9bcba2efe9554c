#pragma once

// Linear attention (Katharopoulos et al., "Transformers are RNNs", 2020). Per head, with a
// positive feature map φ:
//
//   S_t = S_{t-1} + φ(k_t) v_tᵀ          [head_dim x head_dim]
//   z_t = z_{t-1} + φ(k_t)               [head_dim]
//   o_t = S_tᵀ φ(q_t) / (z_tᵀ φ(q_t) + eps)
//
// then the heads are concatenated and projected back to d_model.
//
// Options:
//   head_dim     width of each head (default d_model / heads; heads come from the decoder)
//   feature_map  "elu1" (elu(x) + 1, the paper's) or "relu"; both keep φ ≥ 0, so the
//                normaliser z_tᵀφ(q_t) is never negative. An identity map is not offered: its
//                normaliser can vanish or change sign.
//   qk_norm      L2-normalise q and k per head before φ (default false)
//   impl         "fused" (default): ops::linear_attention, the kernels of
//                kernels/linear_attention/; "reference": ops::linear_attention_reference
//   eps          added to the normaliser, > 0 (default 1e-6); it is what keeps relu, whose
//                φ can be all zero, from dividing by zero
//
// State: {S [batch, heads, head_dim, head_dim], z [batch, heads, head_dim]}.

#include "runtime/model/heads.h"

namespace memscript {

class LinearAttentionMixerImpl : public MixerImpl {
 public:
  LinearAttentionMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

  ops::Activation feature_map() const;  // φ, folded into the q and k projections

 private:
  HeadShape shape_;
  std::string feature_map_;
  bool qk_norm_;
  bool qkv_bias_;
  double eps_;
  bool fused_;
  QkvProjections qkv_;
  torch::nn::Linear output_{nullptr};
};

Mixer make_linear_attention_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
