#include "layer_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace memscript::kernels {

namespace {

// Rows go in chunks whose 1/sqrt runs as one loop over the chunk (which vectorizes), rather than
// one dependent divide and square root per row: at the widths of small models (4, 64) those
// were most of the forward's time.
constexpr int64_t kRowsPerChunk = 16;

template <typename T>
void forward_rows(const LayerNormForward<T>& a, LayerNormShape shape, int64_t begin, int64_t end) {
  const int64_t width = shape.width;
  const double inverse_width = 1.0 / static_cast<double>(width);
  double mean[kRowsPerChunk] = {}, rstd[kRowsPerChunk] = {};
  for (int64_t first = begin; first < end; first += kRowsPerChunk) {
    const int64_t count = std::min(kRowsPerChunk, end - first);
    for (int64_t i = 0; i < count; ++i) {
      const T* x = a.x + (first + i) * width;
      double sum = 0;
      for (int64_t c = 0; c < width; ++c) sum += x[c];
      mean[i] = sum * inverse_width;
      double squares = 0;
      for (int64_t c = 0; c < width; ++c) squares += (x[c] - mean[i]) * (x[c] - mean[i]);
      rstd[i] = squares * inverse_width + a.eps;
    }
    for (int64_t i = 0; i < kRowsPerChunk; ++i) rstd[i] = 1.0 / std::sqrt(rstd[i]);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = first + i;
      const T mean_t = static_cast<T>(mean[i]), rstd_t = static_cast<T>(rstd[i]);
      const T* x = a.x + row * width;
      T* y = a.y + row * width;
      for (int64_t c = 0; c < width; ++c) y[c] = (x[c] - mean_t) * rstd_t * a.weight[c] + a.bias[c];
      a.mean[row] = mean_t;
      a.rstd[row] = rstd_t;
    }
  }
}

// grad_x of one row, and its share of the parameter gradients added to the block's partials.
template <typename T>
void backward_row(const LayerNormBackward<T>& a, int64_t width, int64_t row, T* weight_partial,
                  T* bias_partial) {
  const T* x = a.x + row * width;
  const T* g = a.grad_y + row * width;
  const T mean = a.mean[row], rstd = a.rstd[row];
  double sum_gw = 0, sum_gw_xhat = 0;
  for (int64_t c = 0; c < width; ++c) {
    const T xhat = (x[c] - mean) * rstd;
    const T gw = g[c] * a.weight[c];
    sum_gw += gw;
    sum_gw_xhat += static_cast<double>(gw) * xhat;
    weight_partial[c] += g[c] * xhat;
    bias_partial[c] += g[c];
  }
  const double inverse_width = 1.0 / static_cast<double>(width);
  const T mean_gw = static_cast<T>(sum_gw * inverse_width);
  const T mean_gw_xhat = static_cast<T>(sum_gw_xhat * inverse_width);
  T* dx = a.grad_x + row * width;
  for (int64_t c = 0; c < width; ++c) {
    const T xhat = (x[c] - mean) * rstd;
    dx[c] = rstd * (g[c] * a.weight[c] - mean_gw - xhat * mean_gw_xhat);
  }
}

template <typename T>
void backward_blocks(const LayerNormBackward<T>& a, LayerNormShape shape, int64_t begin_block,
                     int64_t end_block) {
  const int64_t width = shape.width;
  for (int64_t block = begin_block; block < end_block; ++block) {
    T* weight_partial = a.weight_partials + block * width;
    T* bias_partial = a.bias_partials + block * width;
    std::fill(weight_partial, weight_partial + width, T(0));
    std::fill(bias_partial, bias_partial + width, T(0));
    const int64_t first = block * kLayerNormRowsPerBlock;
    const int64_t last = std::min(shape.rows, first + kLayerNormRowsPerBlock);
    for (int64_t row = first; row < last; ++row)
      backward_row(a, width, row, weight_partial, bias_partial);
  }
}

}  // namespace

void layer_norm_forward_cpu(const LayerNormForward<float>& args, LayerNormShape shape,
                            int64_t begin, int64_t end) {
  forward_rows(args, shape, begin, end);
}
void layer_norm_forward_cpu(const LayerNormForward<double>& args, LayerNormShape shape,
                            int64_t begin, int64_t end) {
  forward_rows(args, shape, begin, end);
}
void layer_norm_backward_cpu(const LayerNormBackward<float>& args, LayerNormShape shape,
                             int64_t begin_block, int64_t end_block) {
  backward_blocks(args, shape, begin_block, end_block);
}
void layer_norm_backward_cpu(const LayerNormBackward<double>& args, LayerNormShape shape,
                             int64_t begin_block, int64_t end_block) {
  backward_blocks(args, shape, begin_block, end_block);
}
}  // namespace memscript::kernels
