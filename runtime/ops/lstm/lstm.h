#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

struct LstmResult {
  torch::Tensor outputs;  // h_t [batch, length, hidden]
  torch::Tensor h_last;   // [batch, hidden]
  torch::Tensor c_last;   // [batch, hidden]
};

// The LSTM recurrence, from the input projection of every token:
//   (i, f, g, o) = pre_t + W_hh h_{t−1},  c_t = σ(f) ⊙ c_{t−1} + σ(i) ⊙ tanh(g),
//   h_t = σ(o) ⊙ tanh(c_t)
// through kernels/lstm/ as one autograd node where the kernels take the tensors
// (ops::kernels_take), and lstm_recurrence_reference() otherwise. pre: x W_ihᵀ + b_ih + b_hh
// [batch, length, 4 · hidden] in libtorch's gate order (i, f, g, o); weight_hh [4 · hidden,
// hidden]; h0, c0 [batch, hidden] or undefined (zeros).
LstmResult lstm_recurrence(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                           const torch::Tensor& h0, const torch::Tensor& c0);

// The same in composed libtorch ops, one step at a time: the oracle of the op's tests. (The lstm
// mixer's impl = "reference" runs libtorch's own torch::nn::LSTM instead, input projection and
// all, an oracle written by others.)
LstmResult lstm_recurrence_reference(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                                     const torch::Tensor& h0, const torch::Tensor& c0);

}  // namespace memscript::ops
