#pragma once

// Rows scaled to unit length, the q and k normalization of DeltaNet: for each row x of a
// contiguous [rows, width] array, y = x / max(‖x‖, eps) (torch's F.normalize).
//
// Backward, with n = max(‖x‖, eps):  dx = (g − y (y·g)) / n  where ‖x‖ ≥ eps, and g / eps where
// the norm was clamped (then n does not depend on x). Rows are independent; the row sums run in
// double.

#include <cstdint>

namespace memscript::kernels {

struct L2NormalizeShape {
  int64_t rows;
  int64_t width;
};

// Rows [begin, end). norms[r] = ‖x_r‖ before the clamp, kept for the backward.
void l2_normalize_forward_cpu(const float* x, float* y, float* norms, double eps,
                              L2NormalizeShape shape, int64_t begin, int64_t end);
void l2_normalize_forward_cpu(const double* x, double* y, double* norms, double eps,
                              L2NormalizeShape shape, int64_t begin, int64_t end);

void l2_normalize_backward_cpu(const float* y, const float* norms, const float* grad_y,
                               float* grad_x, double eps, L2NormalizeShape shape, int64_t begin,
                               int64_t end);
void l2_normalize_backward_cpu(const double* y, const double* norms, const double* grad_y,
                               double* grad_x, double eps, L2NormalizeShape shape, int64_t begin,
                               int64_t end);

}  // namespace memscript::kernels
