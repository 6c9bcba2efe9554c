#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct LstmResult {
  torch::Tensor outputs;  // h_t [batch, length, hidden]
  torch::Tensor h_last;   // [batch, hidden]
  torch::Tensor c_last;   // [batch, hidden]
};

// The LSTM recurrence through kernels/lstm/lstm.h as one autograd node. pre: the input projection
// x W_ihᵀ + b_ih + b_hh [batch, length, 4 · hidden] in libtorch's gate order (i, f, g, o);
// weight_hh [4 · hidden, hidden]; h0, c0 [batch, hidden] or undefined (zeros). CPU float32 /
// float64 and CUDA float32.
LstmResult lstm_recurrence(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                           const torch::Tensor& h0, const torch::Tensor& c0);

}  // namespace memscript::ops
