#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct SelectiveScanResult {
  torch::Tensor y;       // [batch, length, channels], without the D skip
  torch::Tensor h_last;  // [batch, channels, states]
};

// Mamba's selective scan:
//   h_t = a(Δ_t A) ⊙ h_{t−1} + (Δ_t u_t) B_t,  y_t = h_t C_t,  a = exp or 2·exp − 1
// through kernels/selective_scan/ as one autograd op where the kernels take the tensors
// (ops::kernels_take), and selective_scan_reference() otherwise.
// u, delta: [B, L, D]; A: [D, N]; B, C: [B, L, N]; h0: [B, D, N]. Never forms [B, L, D, N]:
// without gradients (NoGradGuard, or no input requiring grad) it holds O(B·D·N) state; with
// them it keeps a checkpoint every ~sqrt(L) steps for the backward.
SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const torch::Tensor& h0,
                                   bool negative_eigenvalues);

// The same in composed libtorch ops, one step at a time (impl = "reference", and the oracle of
// the tests): forms the transitions and inputs of every step, [B, L, D, N], at once.
SelectiveScanResult selective_scan_reference(const torch::Tensor& u, const torch::Tensor& delta,
                                             const torch::Tensor& A, const torch::Tensor& B,
                                             const torch::Tensor& C, const torch::Tensor& h0,
                                             bool negative_eigenvalues);

// exp(ΔA) in (0, 1), or 2·exp(ΔA) − 1 in (−1, 1) with negative eigenvalues; ΔA <= 0.
torch::Tensor mamba_transition(const torch::Tensor& delta_A, bool negative_eigenvalues);

}  // namespace memscript::ops
