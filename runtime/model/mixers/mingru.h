#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// minGRU (Feng et al. 2024, "Were RNNs All We Needed?"): a GRU with the hidden state removed
// from the gate and the candidate, which leaves a diagonal linear recurrence, the simplest
// gated RNN a researcher tries after the LSTM family.
//   z_t = σ(W_z x_t + b_z),   h̃_t = W_h x_t + b_h
//   h_t = (1 − z_t) ⊙ h_{t-1} + z_t ⊙ h̃_t,   y_t = W_out h_t + b_out
// Options: hidden (default d_model); impl ("fused": kernels/gated_scan/gated_scan.h, with the
// block's layer norm and both projections fused in at widths up to 16 on the CPU,
// kernels/gated_block/gated_block.h; or "reference": a step loop of libtorch ops);
// negative_eigenvalues (default false): the carry becomes 1 − 2z_t, in (−1, 1) instead of (0, 1),
// while the candidate keeps its weight z_t:
//   h_t = (1 − 2z_t) ⊙ h_{t-1} + z_t ⊙ h̃_t
// so that the state can flip its sign each step, which parity needs and a convex mix of old
// and new cannot do (Grazzi et al. 2024). At the default, this is minGRU as published.
// State: {h}, [batch, hidden].
class MinGruMixerImpl : public MixerImpl {
 public:
  MinGruMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  MixerOutput forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                             const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  int64_t hidden_;
  bool negative_eigenvalues_;
  Impl impl_;
  torch::nn::Linear input_{nullptr};  // [z, h̃] pre-activations
  torch::nn::Linear output_{nullptr};
};

Mixer make_mingru_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
