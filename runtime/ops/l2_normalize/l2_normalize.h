#pragma once

#include "runtime/torch.h"

namespace memscript::ops {

// x / max(‖x‖, 1e-12) along the last axis (torch's F.normalize), as one autograd node: on the
// CPU in float32/float64 through kernels/l2_normalize.h, elsewhere through F.normalize.
torch::Tensor l2_normalize(const torch::Tensor& x);

// The composed-op version: the oracle of the tests, and the path off the CPU.
torch::Tensor l2_normalize_reference(const torch::Tensor& x);

}  // namespace memscript::ops
