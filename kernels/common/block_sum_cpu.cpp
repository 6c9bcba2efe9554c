#include "kernels/common/block_sum.h"

#include <algorithm>

namespace memscript::kernels {

namespace {
template <typename T>
void sum_blocks(const T* partials, int64_t blocks, int64_t size, int64_t stride, T* sum) {
  if (blocks == 0) {
    std::fill(sum, sum + size, T(0));
    return;
  }
  std::copy(partials, partials + size, sum);
  for (int64_t b = 1; b < blocks; ++b) {
    const T* partial = partials + b * stride;
    for (int64_t j = 0; j < size; ++j) sum[j] += partial[j];
  }
}
}  // namespace

void sum_blocks_cpu(const float* partials, int64_t blocks, int64_t size, int64_t stride,
                    float* sum) {
  sum_blocks(partials, blocks, size, stride, sum);
}
void sum_blocks_cpu(const double* partials, int64_t blocks, int64_t size, int64_t stride,
                    double* sum) {
  sum_blocks(partials, blocks, size, stride, sum);
}

}  // namespace memscript::kernels
