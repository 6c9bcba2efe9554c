#include "runtime/ops/lstm/lstm.h"

namespace memscript::ops {

LstmResult lstm_recurrence_reference(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                                     const torch::Tensor& h0, const torch::Tensor& c0) {
  const int64_t hidden = pre.size(2) / 4;
  const auto zeros = [&] { return torch::zeros({pre.size(0), hidden}, pre.options()); };
  torch::Tensor h = h0.defined() ? h0 : zeros();
  torch::Tensor c = c0.defined() ? c0 : zeros();
  std::vector<torch::Tensor> outputs;
  outputs.reserve(static_cast<size_t>(pre.size(1)));
  for (int64_t t = 0; t < pre.size(1); ++t) {
    const std::vector<torch::Tensor> gates =
        (pre.select(1, t) + torch::matmul(h, weight_hh.t())).chunk(4, -1);
    c = torch::sigmoid(gates[1]) * c + torch::sigmoid(gates[0]) * torch::tanh(gates[2]);
    h = torch::sigmoid(gates[3]) * torch::tanh(c);
    outputs.push_back(h);
  }
  return {torch::stack(outputs, 1), h, c};
}

}  // namespace memscript::ops
