#include "kernels/l2_normalize/l2_normalize.h"

#include <algorithm>
#include <cmath>

namespace memscript::kernels {

namespace {

// Rows go in blocks: the loops along a row stay per row (width is 1 to 64), and the square root
// and division of every row of the block run in one loop that vectorizes. Each row's numbers are
// computed as a loop row by row would (-ffp-contract=off: same bits).
constexpr int64_t kRowsPerBlock = 256;

template <typename T>
void forward_rows(const T* x, T* y, T* norms, double eps, L2NormalizeShape s, int64_t begin,
                  int64_t end) {
  double squares[kRowsPerBlock];
  T scale[kRowsPerBlock];
  for (int64_t first = begin; first < end; first += kRowsPerBlock) {
    const int64_t rows = std::min(kRowsPerBlock, end - first);
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = x + (first + i) * s.width;
      double sum = 0;
      for (int64_t c = 0; c < s.width; ++c) sum += static_cast<double>(row[c]) * row[c];
      squares[i] = sum;
    }
    for (int64_t i = 0; i < rows; ++i) {
      const T norm = static_cast<T>(std::sqrt(squares[i]));
      norms[first + i] = norm;
      scale[i] = T(1) / std::max(norm, static_cast<T>(eps));
    }
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = x + (first + i) * s.width;
      T* out = y + (first + i) * s.width;
      for (int64_t c = 0; c < s.width; ++c) out[c] = row[c] * scale[i];
    }
  }
}

template <typename T>
void backward_rows(const T* y, const T* norms, const T* grad_y, T* grad_x, double eps,
                   L2NormalizeShape s, int64_t begin, int64_t end) {
  double dots[kRowsPerBlock];
  T along[kRowsPerBlock], scale[kRowsPerBlock];
  for (int64_t first = begin; first < end; first += kRowsPerBlock) {
    const int64_t rows = std::min(kRowsPerBlock, end - first);
    for (int64_t i = 0; i < rows; ++i) {
      const T* yr = y + (first + i) * s.width;
      const T* g = grad_y + (first + i) * s.width;
      double dot = 0;
      for (int64_t c = 0; c < s.width; ++c) dot += static_cast<double>(yr[c]) * g[c];
      dots[i] = dot;
    }
    for (int64_t i = 0; i < rows; ++i) {
      const T norm = norms[first + i];
      const bool clamped = norm < static_cast<T>(eps);  // as torch's clamp_min backward
      along[i] = clamped ? T(0) : static_cast<T>(dots[i]);
      scale[i] = T(1) / std::max(norm, static_cast<T>(eps));
    }
    for (int64_t i = 0; i < rows; ++i) {
      const T* yr = y + (first + i) * s.width;
      const T* g = grad_y + (first + i) * s.width;
      T* dx = grad_x + (first + i) * s.width;
      for (int64_t c = 0; c < s.width; ++c) dx[c] = (g[c] - yr[c] * along[i]) * scale[i];
    }
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
