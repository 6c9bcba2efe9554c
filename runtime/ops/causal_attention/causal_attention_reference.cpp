#include <cmath>

#include "runtime/ops/causal_attention/causal_attention.h"

namespace memscript::ops {

torch::Tensor causal_attention_reference(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v) {
  const int64_t length = q.size(2), total = k.size(2);
  const auto index = torch::TensorOptions().dtype(torch::kLong).device(q.device());
  const torch::Tensor keys = torch::arange(total, index).unsqueeze(0);
  const torch::Tensor queries = torch::arange(total - length, total, index).unsqueeze(1);
  const torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(q.size(3));
  return torch::matmul(torch::softmax(scores.masked_fill(keys > queries, -INFINITY), -1), v);
}

}  // namespace memscript::ops
