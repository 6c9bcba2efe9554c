#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct GatedScanResult {
  torch::Tensor outputs;  // [batch, length, hidden]
  torch::Tensor last;     // [batch, hidden]: the state after the last step (float for bf16 pre)
};

// The gated diagonal scans of qLSTM and minGRU, gates included: each runs kernels/gated_scan/ as
// one autograd node where the kernels take the tensors (ops::kernels_take) and its
// *_reference() twin, a step loop of libtorch ops and the oracle of the tests, otherwise.

// qLSTM's cell: pre is the gate projection [batch, length, 4 · hidden] (f, i, z, o);
// forget_bias [hidden]; c0 [batch, hidden] or undefined (zeros).
//   f_t = qlstm_forget_gate(pre_f + b_f + 1),  c_t = f_t ⊙ c_{t−1} + σ(pre_i) ⊙ tanh(pre_z)
// outputs = σ(pre_o) ⊙ tanh(c), last = c at the end.
GatedScanResult qlstm_cell(const torch::Tensor& pre, const torch::Tensor& forget_bias,
                           const torch::Tensor& c0, bool negative_eigenvalues);
GatedScanResult qlstm_cell_reference(const torch::Tensor& pre, const torch::Tensor& forget_bias,
                                     const torch::Tensor& c0, bool negative_eigenvalues);

// The forget gate from its pre-activation (b_f + 1 already added): σ in (0, 1), or
// 2σ − 1 in (−1, 1) with negative eigenvalues.
torch::Tensor qlstm_forget_gate(const torch::Tensor& preactivation, bool negative_eigenvalues);

// minGRU's cell: pre [batch, length, 2 · hidden] (z, h̃); h0 [batch, hidden] or undefined.
//   z_t = σ(pre_z),  h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t  (1 − 2 z_t with negative eigenvalues)
// outputs = h at every step, last = h at the end.
GatedScanResult mingru_cell(const torch::Tensor& pre, const torch::Tensor& h0,
                            bool negative_eigenvalues);
GatedScanResult mingru_cell_reference(const torch::Tensor& pre, const torch::Tensor& h0,
                                      bool negative_eigenvalues);

}  // namespace memscript::ops
