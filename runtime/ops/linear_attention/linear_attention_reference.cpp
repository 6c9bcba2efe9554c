#include "runtime/ops/linear_attention/linear_attention.h"

namespace memscript::ops {

namespace {

// Tokens per block: big enough that the block's matrix products beat a per-token loop, small
// enough that its [block x block] scores stay cheap.
constexpr int64_t kBlock = 64;

// One block: what the carried state contributes, plus the causal sum within the block.
LinearAttentionResult attend_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                   const torch::Tensor& v, const torch::Tensor& sum,
                                   const torch::Tensor& normaliser, double eps) {
  const torch::Tensor scores = torch::matmul(phi_q, phi_k.transpose(-1, -2)).tril();
  const torch::Tensor numerator = torch::matmul(phi_q, sum) + torch::matmul(scores, v);
  const torch::Tensor denominator =
      torch::matmul(phi_q, normaliser.unsqueeze(-1)) + scores.sum(-1, true) + eps;
  return {numerator / denominator, sum + torch::matmul(phi_k.transpose(-1, -2), v),
          normaliser + phi_k.sum(2)};
}

}  // namespace

LinearAttentionResult linear_attention_reference(const torch::Tensor& phi_q,
                                                 const torch::Tensor& phi_k, const torch::Tensor& v,
                                                 const torch::Tensor& sum,
                                                 const torch::Tensor& normaliser, double eps) {
  const int64_t batch = v.size(0), heads = v.size(1), dk = phi_k.size(3), dv = v.size(3);
  LinearAttentionResult carried{
      {},
      sum.defined() ? sum : torch::zeros({batch, heads, dk, dv}, v.options()),
      normaliser.defined() ? normaliser : torch::zeros({batch, heads, dk}, v.options())};
  std::vector<torch::Tensor> outputs;
  for (int64_t start = 0; start < v.size(2); start += kBlock) {
    const int64_t length = std::min(kBlock, v.size(2) - start);
    carried = attend_block(phi_q.narrow(2, start, length), phi_k.narrow(2, start, length),
                           v.narrow(2, start, length), carried.sum, carried.normaliser, eps);
    outputs.push_back(carried.outputs);
  }
  return {torch::cat(outputs, 2), carried.sum, carried.normaliser};
}

}  // namespace memscript::ops
