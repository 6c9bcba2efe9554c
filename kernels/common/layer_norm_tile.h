#pragma once

// The layer norm of layer_norm.h on one row tile (row_tile.h): every lane normalizes its own
// row. Shared by the layer-norm kernel and the kernels that fuse a layer norm into what follows
// it. CPU only.

#include <cmath>
#include <cstdint>

#include "kernels/common/row_tile.h"

namespace memscript::kernels {

// The statistics a tile's backward needs: per lane the row's mean and 1/sqrt(var + eps).
template <typename T>
struct TileMoments {
  Lanes<T> mean;
  Lanes<T> rstd;
};

template <typename T>
inline TileMoments<T> tile_layer_norm_moments(const Lanes<T>* __restrict x, int64_t width,
                                              double eps) {
  const T inverse_width = T(1) / static_cast<T>(width);
  Lanes<T> sum{};
  for (int64_t c = 0; c < width; ++c) sum += x[c];
  const Lanes<T> mean = sum * inverse_width;
  Lanes<T> squares{};
  for (int64_t c = 0; c < width; ++c) {
    const Lanes<T> d = x[c] - mean;
    squares += d * d;
  }
  const Lanes<T> variance = squares * inverse_width + static_cast<T>(eps);
  Lanes<T> rstd;
  for (int64_t r = 0; r < kTileRows; ++r) rstd[r] = T(1) / std::sqrt(variance[r]);
  return {mean, rstd};
}

// y[c] = (x[c] − mean) · rstd · weight[c] + bias[c].
template <typename T>
inline void tile_layer_norm_apply(const Lanes<T>* __restrict x, int64_t width,
                                  const TileMoments<T>& m, const T* __restrict weight,
                                  const T* __restrict bias, Lanes<T>* __restrict y) {
  for (int64_t c = 0; c < width; ++c) y[c] = (x[c] - m.mean) * m.rstd * weight[c] + bias[c];
}

// The gradient to x from g = dLoss/dy, and the parameter gradients' per-lane partials added to
// weight_acc and bias_acc ([width] columns each):
//   dx = rstd · (gw − mean(gw) − x̂ · mean(gw · x̂)),  gw = g · weight,  x̂ = (x − mean) · rstd.
template <typename T>
inline void tile_layer_norm_backward(const Lanes<T>* __restrict x, const Lanes<T>* __restrict g,
                                     int64_t width, const TileMoments<T>& m,
                                     const T* __restrict weight, Lanes<T>* __restrict grad_x,
                                     Lanes<T>* __restrict weight_acc,
                                     Lanes<T>* __restrict bias_acc) {
  Lanes<T> sum_gw{}, sum_gw_xhat{};
  for (int64_t c = 0; c < width; ++c) {
    const Lanes<T> xhat = (x[c] - m.mean) * m.rstd;
    const Lanes<T> gw = g[c] * weight[c];
    sum_gw += gw;
    sum_gw_xhat += gw * xhat;
    weight_acc[c] += g[c] * xhat;
    bias_acc[c] += g[c];
  }
  const T inverse_width = T(1) / static_cast<T>(width);
  const Lanes<T> mean_gw = sum_gw * inverse_width;
  const Lanes<T> mean_gw_xhat = sum_gw_xhat * inverse_width;
  for (int64_t c = 0; c < width; ++c) {
    const Lanes<T> xhat = (x[c] - m.mean) * m.rstd;
    grad_x[c] = m.rstd * (g[c] * weight[c] - mean_gw - xhat * mean_gw_xhat);
  }
}

}  // namespace memscript::kernels
