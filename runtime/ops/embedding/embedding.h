#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// weight[tokens]: tokens int64 of any shape, weight [vocab, width] -> [..., width], as one
// autograd node. On the CPU in float32/float64 the weight's gradient comes from
// kernels/embedding/embedding.h (the same bits for any thread count, and without libtorch's sort of
// the tokens); elsewhere from torch::embedding.
torch::Tensor embedding(const torch::Tensor& tokens, const torch::Tensor& weight);

}  // namespace memscript::ops
