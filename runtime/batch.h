#pragma once

// A sampled batch as tensors: inputs and targets int64 [batch, length], mask bool.

#include "runtime/task.h"
#include "runtime/torch.h"

namespace memscript {

struct TensorBatch {
  torch::Tensor inputs;
  torch::Tensor targets;
  torch::Tensor mask;
};

TensorBatch to_tensors(const HostBatch& host, torch::Device device = torch::kCPU);

}  // namespace memscript
