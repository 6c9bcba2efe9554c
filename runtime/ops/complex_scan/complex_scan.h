#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct ComplexScanResult {
  torch::Tensor h_re, h_im;        // [batch, length, channels]
  torch::Tensor last_re, last_im;  // [batch, channels]
};

// h[:, t] = λ ⊙ h[:, t-1] + b[:, t] in complex numbers carried as (re, im) pairs (the LRU's
// recurrence), through kernels/complex_scan/ as one autograd op with a hand-written backward for
// λ, b and h0 where the kernels take the tensors (ops::kernels_take), and
// complex_scan_reference() otherwise.
// lambda_re, lambda_im: [channels]; b_re, b_im: [batch, length, channels]; h0_re, h0_im:
// [batch, channels].
ComplexScanResult complex_scan(const torch::Tensor& lambda_re, const torch::Tensor& lambda_im,
                               const torch::Tensor& b_re, const torch::Tensor& b_im,
                               const torch::Tensor& h0_re, const torch::Tensor& h0_im);

// The same in composed libtorch ops, one step at a time (impl = "reference", and the oracle of
// the tests).
ComplexScanResult complex_scan_reference(const torch::Tensor& lambda_re,
                                         const torch::Tensor& lambda_im, const torch::Tensor& b_re,
                                         const torch::Tensor& b_im, const torch::Tensor& h0_re,
                                         const torch::Tensor& h0_im);

}  // namespace memscript::ops
