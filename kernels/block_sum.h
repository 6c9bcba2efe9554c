#pragma once

// The last step of every sum over rows that the kernels make thread-count independent: each
// fixed block of rows leaves one partial sum, and the partials are added here in block order.

#include <cstdint>

namespace memscript::kernels {

// sum[j] = Σ_b partials[b · size + j] over b = 0, 1, …, blocks − 1, in that order (blocks ≥ 1).
void sum_blocks_cpu(const float* partials, int64_t blocks, int64_t size, float* sum);
void sum_blocks_cpu(const double* partials, int64_t blocks, int64_t size, double* sum);

}  // namespace memscript::kernels
