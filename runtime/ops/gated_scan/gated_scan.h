#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct GatedScanResult {
  torch::Tensor outputs;  // [batch, length, hidden]
  torch::Tensor last;     // [batch, hidden]: the state after the last step (float for bf16 pre)
};

// qLSTM's cell through kernels/gated_scan/gated_scan.h, gates included, as one autograd node.
// pre: the gate projection [batch, length, 4 · hidden] (f, i, z, o); forget_bias [hidden];
// c0 [batch, hidden] or undefined (zeros). outputs = σ(o) ⊙ tanh(c), last = c at the end.
GatedScanResult qlstm_cell(const torch::Tensor& pre, const torch::Tensor& forget_bias,
                           const torch::Tensor& c0, bool negative_eigenvalues);

// minGRU's cell the same way. pre: [batch, length, 2 · hidden] (z, h̃); h0 [batch, hidden] or
// undefined. outputs = h at every step, last = h at the end.
GatedScanResult mingru_cell(const torch::Tensor& pre, const torch::Tensor& h0,
                            bool negative_eigenvalues);

}  // namespace memscript::ops
