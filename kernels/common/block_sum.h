#pragma once

// The last step of every sum over rows that the kernels make thread-count independent: each
// fixed block of rows leaves one partial sum, and the partials are added here in block order.

#include <cstdint>

namespace memscript::kernels {

// sum[j] = Σ_b partials[b · stride + j] over b = 0, 1, …, blocks − 1, in that order; zeros when
// there are no blocks. `stride` ≥ size lets the partials be the first `size` columns of wider
// rows; the overloads without it read rows of exactly `size`.
void sum_blocks_cpu(const float* partials, int64_t blocks, int64_t size, int64_t stride,
                    float* sum);
void sum_blocks_cpu(const double* partials, int64_t blocks, int64_t size, int64_t stride,
                    double* sum);
inline void sum_blocks_cpu(const float* partials, int64_t blocks, int64_t size, float* sum) {
  sum_blocks_cpu(partials, blocks, size, size, sum);
}
inline void sum_blocks_cpu(const double* partials, int64_t blocks, int64_t size, double* sum) {
  sum_blocks_cpu(partials, blocks, size, size, sum);
}

}  // namespace memscript::kernels
