#include "l2_normalize.h"

#include <algorithm>
#include <cmath>

namespace memscript::kernels {

namespace {

template <typename T>
void forward_rows(const T* x, T* y, T* norms, double eps, L2NormalizeShape s, int64_t begin,
                  int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T* row = x + r * s.width;
    double squares = 0;
    for (int64_t c = 0; c < s.width; ++c) squares += static_cast<double>(row[c]) * row[c];
    const T norm = static_cast<T>(std::sqrt(squares));
    const T scale = T(1) / std::max(norm, static_cast<T>(eps));
    norms[r] = norm;
    T* out = y + r * s.width;
    for (int64_t c = 0; c < s.width; ++c) out[c] = row[c] * scale;
  }
}

template <typename T>
void backward_rows(const T* y, const T* norms, const T* grad_y, T* grad_x, double eps,
                   L2NormalizeShape s, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T* yr = y + r * s.width;
    const T* g = grad_y + r * s.width;
    T* dx = grad_x + r * s.width;
    const bool clamped = norms[r] < static_cast<T>(eps);  // as torch's clamp_min backward
    const T scale = T(1) / std::max(norms[r], static_cast<T>(eps));
    double dot = 0;
    if (!clamped) {
      for (int64_t c = 0; c < s.width; ++c) dot += static_cast<double>(yr[c]) * g[c];
    }
    const T along = static_cast<T>(dot);
    for (int64_t c = 0; c < s.width; ++c) dx[c] = (g[c] - yr[c] * along) * scale;
  }
}

}  // namespace

void l2_normalize_forward_cpu(const float* x, float* y, float* norms, double eps,
                              L2NormalizeShape shape, int64_t begin, int64_t end) {
  forward_rows(x, y, norms, eps, shape, begin, end);
}
void l2_normalize_forward_cpu(const double* x, double* y, double* norms, double eps,
                              L2NormalizeShape shape, int64_t begin, int64_t end) {
  forward_rows(x, y, norms, eps, shape, begin, end);
}
void l2_normalize_backward_cpu(const float* y, const float* norms, const float* grad_y,
                               float* grad_x, double eps, L2NormalizeShape shape, int64_t begin,
                               int64_t end) {
  backward_rows(y, norms, grad_y, grad_x, eps, shape, begin, end);
}
void l2_normalize_backward_cpu(const double* y, const double* norms, const double* grad_y,
                               double* grad_x, double eps, L2NormalizeShape shape, int64_t begin,
                               int64_t end) {
  backward_rows(y, norms, grad_y, grad_x, eps, shape, begin, end);
}

}  // namespace memscript::kernels
