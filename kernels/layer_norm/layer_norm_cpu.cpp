#include <algorithm>

#include "kernels/common/layer_norm_tile.h"
#include "kernels/layer_norm/layer_norm.h"

namespace memscript::kernels {

namespace {

static_assert(kLayerNormRowsPerBlock % kTileRows == 0);

template <typename T>
void forward_rows(const LayerNormForward<T>& a, LayerNormShape shape, int64_t begin, int64_t end) {
  const int64_t width = shape.width;
  TileScratch<T> tiles(2 * width);
  Lanes<T>* x = tiles.data();
  Lanes<T>* y = x + width;
  for (int64_t row = begin; row < end; row += kTileRows) {
    const int64_t count = std::min(kTileRows, end - row);
    load_tile(a.x + row * width, width, width, count, x);
    const TileMoments<T> m = tile_layer_norm_moments<T>(x, width, a.eps);
    tile_layer_norm_apply(x, width, m, a.weight, a.bias, y);
    store_tile(y, width, count, a.y + row * width, width);
    store_lanes(m.mean, count, a.mean + row);
    store_lanes(m.rstd, count, a.rstd + row);
  }
}

template <typename T>
void backward_blocks(const LayerNormBackward<T>& a, LayerNormShape shape, int64_t begin_block,
                     int64_t end_block) {
  const int64_t width = shape.width;
  // x, g and grad_x of one tile, then the block's weight and bias partials per lane.
  TileScratch<T> tiles(5 * width);
  Lanes<T>* x = tiles.data();
  Lanes<T>* g = x + width;
  Lanes<T>* grad_x = g + width;
  Lanes<T>* weight_acc = grad_x + width;
  Lanes<T>* bias_acc = weight_acc + width;
  for (int64_t block = begin_block; block < end_block; ++block) {
    std::fill(weight_acc, weight_acc + 2 * width, Lanes<T>{});
    const int64_t first = block * kLayerNormRowsPerBlock;
    const int64_t last = std::min(shape.rows, first + kLayerNormRowsPerBlock);
    for (int64_t row = first; row < last; row += kTileRows) {
      const int64_t count = std::min(kTileRows, last - row);
      load_tile(a.x + row * width, width, width, count, x);
      load_tile(a.grad_y + row * width, width, width, count, g);
      const TileMoments<T> m{load_lanes(a.mean + row, count), load_lanes(a.rstd + row, count)};
      tile_layer_norm_backward(x, g, width, m, a.weight, grad_x, weight_acc, bias_acc);
      store_tile(grad_x, width, count, a.grad_x + row * width, width);
    }
    sum_lanes(weight_acc, width, a.weight_partials + block * width);
    sum_lanes(bias_acc, width, a.bias_partials + block * width);
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
