#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

enum class LossReduction { mean, sum };

// Cross-entropy over the scored positions only, as one autograd node: logits [..., classes],
// targets (int64) and mask (bool) with the leading shape of logits. `mean` divides by the
// number of scored positions (at least 1), `sum` does not. On the CPU in float32/float64
// through kernels/cross_entropy/cross_entropy.h, whose sum is the same bits for any thread count;
// elsewhere through composed libtorch ops. A scored target outside [0, classes) is an error.
torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                   const torch::Tensor& mask, LossReduction reduction);

// The composed-op version: the oracle of the tests, and the path off the CPU.
torch::Tensor masked_cross_entropy_reference(const torch::Tensor& logits,
                                             const torch::Tensor& targets,
                                             const torch::Tensor& mask, LossReduction reduction);

}  // namespace memscript::ops
