#include "runtime/ops/delta_rule/delta_rule.h"

namespace memscript::ops {

torch::Tensor delta_rule_step(const torch::Tensor& state, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& beta,
                              const torch::Tensor& alpha, StateUpdate update) {
  // α one number per head ([batch, heads]) or one per key column ([batch, heads, dk]).
  const torch::Tensor decayed = !alpha.defined()   ? state
                                : alpha.dim() == 3 ? state * alpha.unsqueeze(-2)
                                                   : state * alpha.unsqueeze(-1).unsqueeze(-1);
  if (update == StateUpdate::additive)
    return decayed + (beta.unsqueeze(-1) * v).unsqueeze(-1) * k.unsqueeze(-2);
  // α S (I − β k kᵀ) + β v kᵀ = α S + β (v − α S k) kᵀ: a rank-one correction, no dk x dk matrix.
  const torch::Tensor recalled = torch::matmul(decayed, k.unsqueeze(-1)).squeeze(-1);
  const torch::Tensor correction = beta.unsqueeze(-1) * (v - recalled);
  return decayed + correction.unsqueeze(-1) * k.unsqueeze(-2);
}

DeltaRuleResult delta_rule_reference(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& beta,
                                     const torch::Tensor& alpha, const torch::Tensor& state,
                                     StateUpdate update) {
  torch::Tensor s = state.defined()
                        ? state
                        : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  std::vector<torch::Tensor> outputs;
  for (int64_t t = 0; t < v.size(2); ++t) {
    s = delta_rule_step(s, k.select(2, t), v.select(2, t), beta.select(2, t),
                        alpha.defined() ? alpha.select(2, t) : torch::Tensor(), update);
    outputs.push_back(torch::matmul(s, q.select(2, t).unsqueeze(-1)).squeeze(-1));
  }
  return {torch::stack(outputs, 2), s};
}

}  // namespace memscript::ops
