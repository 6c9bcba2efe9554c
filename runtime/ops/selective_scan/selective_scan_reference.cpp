#include "runtime/ops/selective_scan/selective_scan.h"

namespace memscript::ops {

torch::Tensor mamba_transition(const torch::Tensor& delta_A, bool negative_eigenvalues) {
  const torch::Tensor decay = torch::exp(delta_A);
  return negative_eigenvalues ? 2.0 * decay - 1.0 : decay;
}

SelectiveScanResult selective_scan_reference(const torch::Tensor& u, const torch::Tensor& delta,
                                             const torch::Tensor& A, const torch::Tensor& B,
                                             const torch::Tensor& C, const torch::Tensor& h0,
                                             bool negative_eigenvalues) {
  // Transitions and inputs for every step at once, [B, L, d_inner, d_state]; only the
  // recurrence itself has to walk the sequence.
  const torch::Tensor a = mamba_transition(delta.unsqueeze(-1) * A, negative_eigenvalues);
  const torch::Tensor b = (delta * u).unsqueeze(-1) * B.unsqueeze(2);
  torch::Tensor h = h0;
  std::vector<torch::Tensor> states;
  states.reserve(static_cast<size_t>(u.size(1)));
  for (int64_t t = 0; t < u.size(1); ++t) {
    h = a.select(1, t) * h + b.select(1, t);
    states.push_back(h);
  }
  const torch::Tensor y = (torch::stack(states, 1) * C.unsqueeze(2)).sum(-1);
  return {y, h};
}

}  // namespace memscript::ops
