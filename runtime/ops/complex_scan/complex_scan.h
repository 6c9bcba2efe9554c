#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct ComplexScanResult {
  torch::Tensor h_re, h_im;        // [batch, length, channels]
  torch::Tensor last_re, last_im;  // [batch, channels]
};

// h[:, t] = λ ⊙ h[:, t-1] + b[:, t] in complex numbers carried as (re, im) pairs, through
// kernels/complex_scan/complex_scan.h, with a hand-written backward for λ, b and h0.
// lambda_re, lambda_im: [channels]; b_re, b_im: [batch, length, channels]; h0_re, h0_im:
// [batch, channels]. float32/float64 on the CPU, float32 on CUDA.
ComplexScanResult complex_scan(const torch::Tensor& lambda_re, const torch::Tensor& lambda_im,
                               const torch::Tensor& b_re, const torch::Tensor& b_im,
                               const torch::Tensor& h0_re, const torch::Tensor& h0_im);

}  // namespace memscript::ops
