#include "runtime/batch.h"

namespace memscript {

TensorBatch to_tensors(const HostBatch& host, torch::Device device) {
  const std::vector<int64_t> shape = {host.batch, host.length};
  auto copy = [&](const void* data, torch::ScalarType type) {
    return torch::from_blob(const_cast<void*>(data), shape, torch::TensorOptions().dtype(type))
        .to(device, /*non_blocking=*/false, /*copy=*/true);
  };
  return {copy(host.inputs.data(), torch::kInt64), copy(host.targets.data(), torch::kInt64),
          copy(host.mask.data(), torch::kBool)};
}

}  // namespace memscript
