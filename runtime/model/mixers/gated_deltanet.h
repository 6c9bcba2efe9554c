#pragma once

// Gated DeltaNet (Yang, Kautz and Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with
// Delta Rule", 2024): DeltaNet whose state also decays, so a head can forget at once instead
// of overwriting key by key:
//
//   S_t = α_t S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,   o_t = S_t q_t
//   α_t = exp(−exp(A_log) · softplus(w_αᵀ x_t + dt_bias))  in (0, 1), one per head and token
//
// A_log and dt_bias are per-head parameters initialised as in Mamba-2 (A in [1, 16], the
// softplus step in [0.001, 0.1]), so α starts between about 0.2 and 1. The reference block's
// gate on the output norm is left out, and its short convolutions are the decoder's `short_conv`
// or deltanet's `qkv_conv`: this is the recurrence, to compare with deltanet's.
//
// Options, q/k normalisation, β and its negative_eigenvalues range, o_norm are deltanet's (see
// deltanet.h); with negative eigenvalues the transition's eigenvalue along k_t is
// α_t (1 − β_t), still in (−1, 1).
//
// State: as deltanet's: {S [batch, heads, head_dim (values), head_dim (keys)]}, then qkv_conv's
// windows.

#include "runtime/model/mixers/deltanet.h"

namespace memscript {

class GatedDeltaNetMixerImpl : public DeltaNetMixerImpl {
 public:
  GatedDeltaNetMixerImpl(const MixerContext& context, Options& options);

  // α for every head and token: [batch, heads, length], in (0, 1).
  torch::Tensor decay(const torch::Tensor& x) override;

 private:
  torch::nn::Linear alpha_{nullptr};
  torch::Tensor a_log_;    // [heads]
  torch::Tensor dt_bias_;  // [heads]
};

Mixer make_gated_deltanet_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
