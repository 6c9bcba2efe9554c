#include "block_sum.h"

#include <algorithm>

namespace memscript::kernels {

namespace {
template <typename T>
void sum_blocks(const T* partials, int64_t blocks, int64_t size, T* sum) {
  std::copy(partials, partials + size, sum);
  for (int64_t b = 1; b < blocks; ++b) {
    const T* partial = partials + b * size;
    for (int64_t j = 0; j < size; ++j) sum[j] += partial[j];
  }
}
}  // namespace

void sum_blocks_cpu(const float* partials, int64_t blocks, int64_t size, float* sum) {
  sum_blocks(partials, blocks, size, sum);
}
void sum_blocks_cpu(const double* partials, int64_t blocks, int64_t size, double* sum) {
  sum_blocks(partials, blocks, size, sum);
}

}  // namespace memscript::kernels
