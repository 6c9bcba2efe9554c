#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/causal_conv/causal_conv.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// The Mamba-1 block (Gu & Dao 2023), as a reference built from libtorch ops.
//
//   x, z = split(W_in u)                                   each [B, L, d_inner]
//   x = SiLU(causal depthwise conv1d(x))                   kernel d_conv, with bias
//   δ, B_t, C_t = split(W_x x)                             dt_rank, d_state, d_state
//   Δ_t = softplus(W_dt δ + b_dt)                          [d_inner]
//   A = −exp(A_log)                                        [d_inner, d_state]
//   h_t = a(Δ_t A) ⊙ h_{t−1} + Δ_t B_t x_t                 per channel, [d_inner, d_state]
//   y_t = C_t · h_t + D ⊙ x_t
//   out = W_out (y ⊙ SiLU(z))
//
// The transition a is exp(ΔA), in (0, 1). With negative_eigenvalues it is 2·exp(ΔA) − 1, in
// (−1, 1): Grazzi et al. ("Unlocking State-Tracking in Linear RNNs Through Negative
// Eigenvalues") show that a diagonal linear RNN with only positive eigenvalues cannot track
// parity at any finite precision, and that allowing (−1, 1) lets it. The map keeps |a| < 1, so
// the recurrence stays stable, and leaves the rest of the block (Δ, B, C, the init) as it was.
//
// Initialisation as in the reference implementation: A_log = log(1 .. d_state) in every
// channel; D = 1; b_dt = softplus⁻¹(dt) with dt log-uniform in [1e-3, 1e-1] (floored at 1e-4)
// and W_dt uniform in ±dt_rank^−½, so Δ starts in that range; the conv keeps libtorch's default.
// W_in, W_x normal(0, 0.02); W_out is an output projection. Like the reference, W_in, W_x and
// W_out have no bias.
//
// Options: expand (2, d_inner = expand · d_model), d_state (16), d_conv (4),
//          dt_rank (ceil(d_model / 16)), negative_eigenvalues (false), impl ("fused": the
//          selective scan of kernels/selective_scan/selective_scan.h, which never forms [B, L,
//          d_inner, d_state], and on the CPU the conv and its SiLU as
//          kernels/causal_conv/causal_conv.h; "reference": libtorch's Conv1d and
//          ops::selective_scan_reference below).
// State: {window [B, d_inner, d_conv − 1], the conv's last inputs (zeros at the start);
//         h [B, d_inner, d_state]}.
class MambaMixerImpl : public MixerImpl {
 public:
  MambaMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  void init_dt_projection();
  // SiLU of the causal conv over [previous window, x]: u [B, L, d_inner] and the new window.
  ops::CausalConvResult convolve(const torch::Tensor& x, const MixerState& state);

  int64_t expand_;
  int64_t d_inner_;
  int64_t d_state_;
  int64_t d_conv_;
  int64_t dt_rank_;
  bool negative_eigenvalues_;
  Impl impl_;
  torch::nn::Linear in_proj_{nullptr};
  torch::nn::Conv1d conv_{nullptr};
  torch::nn::Linear x_proj_{nullptr};
  torch::nn::Linear dt_proj_{nullptr};
  torch::nn::Linear out_proj_{nullptr};
  torch::Tensor A_log_;  // [d_inner, d_state]
  torch::Tensor D_;      // [d_inner]
};

Mixer make_mamba_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
