#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct SelectiveScanResult {
  torch::Tensor y;       // [batch, length, channels], without the D skip
  torch::Tensor h_last;  // [batch, channels, states]
};

// Mamba's selective scan through kernels/selective_scan/selective_scan.h, the same contract as
// memscript::selective_scan (runtime/model/mixers/mamba.h):
//   h_t = a(Δ_t A) ⊙ h_{t−1} + (Δ_t u_t) B_t,  y_t = h_t C_t,  a = exp or 2·exp − 1
// u, delta: [B, L, D]; A: [D, N]; B, C: [B, L, N]; h0: [B, D, N]. Never forms [B, L, D, N]:
// without gradients (NoGradGuard, or no input requiring grad) it holds O(B·D·N) state; with
// them it keeps a checkpoint every ~sqrt(L) steps for the backward.
SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const torch::Tensor& h0,
                                   bool negative_eigenvalues);

}  // namespace memscript::ops
