#include <algorithm>

#include "kernels/common/row_tile.h"
#include "kernels/linear/linear.h"

namespace memscript::kernels {

namespace {

// Tiles of one block of rows: the weight gradient's partial of a block is read from all of them.
constexpr int64_t kTilesPerBlock = kSmallLinearRowsPerBlock / kTileRows;
static_assert(kSmallLinearRowsPerBlock % kTileRows == 0);

// Rows [begin, end) of `out`-wide results from `in`-wide inputs, a tile at a time: the tile's
// inputs are transposed in, `compute(inputs, outputs, row, count)` fills the outputs' columns
// (of rows [row, row + count)), and those are transposed back.
template <typename T, typename Compute>
void for_row_tiles(const T* input, int64_t in, T* output, int64_t out, int64_t begin, int64_t end,
                   Compute&& compute) {
  TileScratch<T> tiles(in + out);
  Lanes<T>* x = tiles.data();
  Lanes<T>* y = x + in;
  for (int64_t r = begin; r < end; r += kTileRows) {
    const int64_t count = std::min(kTileRows, end - r);
    load_tile(input + r * in, in, in, count, x);
    compute(x, y, r, count);
    store_tile(y, out, count, output + r * out, out);
  }
}

template <typename T>
void forward(const T* x, const T* weight, const T* bias, ActivationKind activation, T* pre, T* y,
             SmallLinearShape s, int64_t begin, int64_t end) {
  with_activation(activation, [&]<ActivationKind Kind>() {
    const auto compute = [&](const Lanes<T>* in, Lanes<T>* out, int64_t row, int64_t count) {
      tile_linear(in, s.in, weight, bias, s.out, out);
      if constexpr (Kind != ActivationKind::none) {
        if (pre) store_tile(out, s.out, count, pre + row * s.out, s.out);
        T* numbers = tile_numbers<T>(out);
        activate_all<Kind>(numbers, numbers, s.out * kTileRows);
      }
    };
    for_row_tiles(x, s.in, y, s.out, begin, end, compute);
  });
}

template <typename T>
void grad_input(const T* grad_y, const T* weight, T* grad_x, SmallLinearShape s, int64_t begin,
                int64_t end) {
  for_row_tiles(grad_y, s.out, grad_x, s.in, begin, end,
                [&](const Lanes<T>* g, Lanes<T>* gx, int64_t, int64_t) {
                  tile_linear_backward_input(g, s.out, weight, s.in, gx);
                });
}

template <typename T>
void grad_params(const T* grad_y, const T* x, T* weight_partials, T* bias_partials,
                 SmallLinearShape s, int64_t begin, int64_t end) {
  TileScratch<T> g_tiles(kTilesPerBlock * s.out);
  TileScratch<T> x_tiles(kTilesPerBlock * s.in);
  TileScratch<T> scratch(s.out * s.in);
  for (int64_t b = begin; b < end; ++b) {
    const int64_t first = b * kSmallLinearRowsPerBlock;
    const int64_t rows = std::min(kSmallLinearRowsPerBlock, s.rows - first);
    const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t row = first + t * kTileRows;
      const int64_t count = std::min(kTileRows, s.rows - row);
      load_tile(grad_y + row * s.out, s.out, s.out, count, g_tiles.data() + t * s.out);
      load_tile(x + row * s.in, s.in, s.in, count, x_tiles.data() + t * s.in);
    }
    const TileSeries<T> g{g_tiles.data(), s.out, s.out}, xs{x_tiles.data(), s.in, s.in};
    tile_weight_gradient(g, xs, tiles, scratch.data(), weight_partials + b * s.out * s.in);
    if (bias_partials) tile_column_sums(g, tiles, scratch.data(), bias_partials + b * s.out);
  }
}

}  // namespace

void small_linear_forward_cpu(const float* x, const float* weight, const float* bias,
                              ActivationKind activation, float* pre, float* y,
                              SmallLinearShape shape, int64_t begin, int64_t end) {
  forward(x, weight, bias, activation, pre, y, shape, begin, end);
}
void small_linear_forward_cpu(const double* x, const double* weight, const double* bias,
                              ActivationKind activation, double* pre, double* y,
                              SmallLinearShape shape, int64_t begin, int64_t end) {
  forward(x, weight, bias, activation, pre, y, shape, begin, end);
}
void small_linear_grad_input_cpu(const float* grad_y, const float* weight, float* grad_x,
                                 SmallLinearShape shape, int64_t begin, int64_t end) {
  grad_input(grad_y, weight, grad_x, shape, begin, end);
}
void small_linear_grad_input_cpu(const double* grad_y, const double* weight, double* grad_x,
                                 SmallLinearShape shape, int64_t begin, int64_t end) {
  grad_input(grad_y, weight, grad_x, shape, begin, end);
}
void small_linear_grad_params_cpu(const float* grad_y, const float* x, float* weight_partials,
                                  float* bias_partials, SmallLinearShape shape, int64_t begin,
                                  int64_t end) {
  grad_params(grad_y, x, weight_partials, bias_partials, shape, begin, end);
}
void small_linear_grad_params_cpu(const double* grad_y, const double* x, double* weight_partials,
                                  double* bias_partials, SmallLinearShape shape, int64_t begin,
                                  int64_t end) {
  grad_params(grad_y, x, weight_partials, bias_partials, shape, begin, end);
}

}  // namespace memscript::kernels
