#pragma once

#include "runtime/torch.h"

namespace memscript::fused {

struct DiagScanResult {
  torch::Tensor h;       // [batch, length, channels]
  torch::Tensor h_last;  // [batch, channels]
};

// h[:, t] = a[:, t] ⊙ h[:, t-1] + b[:, t] from h0, through kernels/diag_scan.h, with a
// hand-written backward for a, b and h0. a, b: [batch, length, channels]; h0: [batch, channels].
// float32/float64 on the CPU, float32/bf16 on CUDA.
DiagScanResult diag_scan(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0);

}  // namespace memscript::fused
