#include "runtime/ops/gated_scan/gated_scan.h"

namespace memscript::ops {

namespace {

// c_t = f_t ⊙ c_{t−1} + u_t over the length axis of [batch, length, hidden] tensors from c
// [batch, hidden] (undefined: zeros): the states after every step.
torch::Tensor diagonal_scan(const torch::Tensor& f, const torch::Tensor& u, torch::Tensor c) {
  if (!c.defined()) c = torch::zeros({f.size(0), f.size(2)}, f.options());
  std::vector<torch::Tensor> states;
  states.reserve(static_cast<size_t>(f.size(1)));
  for (int64_t t = 0; t < f.size(1); ++t) {
    c = f.select(1, t) * c + u.select(1, t);
    states.push_back(c);
  }
  return torch::stack(states, 1);
}

}  // namespace

torch::Tensor qlstm_forget_gate(const torch::Tensor& preactivation, bool negative_eigenvalues) {
  const torch::Tensor gate = torch::sigmoid(preactivation);
  return negative_eigenvalues ? 2 * gate - 1 : gate;
}

GatedScanResult qlstm_cell_reference(const torch::Tensor& pre, const torch::Tensor& forget_bias,
                                     const torch::Tensor& c0, bool negative_eigenvalues) {
  const std::vector<torch::Tensor> gates = pre.chunk(4, -1);
  const torch::Tensor f = qlstm_forget_gate(gates[0] + forget_bias + 1, negative_eigenvalues);
  const torch::Tensor input = torch::sigmoid(gates[1]) * torch::tanh(gates[2]);
  const torch::Tensor c = diagonal_scan(f, input, c0);
  return {torch::sigmoid(gates[3]) * torch::tanh(c), c.select(1, -1)};
}

GatedScanResult mingru_cell_reference(const torch::Tensor& pre, const torch::Tensor& h0,
                                      bool negative_eigenvalues) {
  const std::vector<torch::Tensor> parts = pre.chunk(2, -1);
  const torch::Tensor z = torch::sigmoid(parts[0]);
  const torch::Tensor carry = negative_eigenvalues ? 1 - 2 * z : 1 - z;
  const torch::Tensor h = diagonal_scan(carry, z * parts[1], h0);
  return {h, h.select(1, -1)};
}

}  // namespace memscript::ops
