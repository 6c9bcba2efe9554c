#include <algorithm>

#include "kernels/common/activation.h"
#include "kernels/common/layer_norm_tile.h"
#include "kernels/common/row_tile.h"
#include "kernels/mlp_block/mlp_block.h"

namespace memscript::kernels {

namespace {

constexpr int64_t kTilesPerBlock = kMlpBlockRowsPerBlock / kTileRows;
static_assert(kMlpBlockRowsPerBlock % kTileRows == 0);

// One tile's n = LN(h) and a = W_up n + b_up, given its moments.
template <typename T>
void pre_activation_of(const MlpBlockWeights<T>& w, const MlpBlockShape& s, const Lanes<T>* h,
                       const TileMoments<T>& moments, Lanes<T>* n, Lanes<T>* a) {
  tile_layer_norm_apply(h, s.width, moments, w.norm_weight, w.norm_bias, n);
  tile_linear(n, s.width, w.up_weight, w.up_bias, s.hidden, a);
}

template <typename T>
void forward_rows(const MlpBlockForward<T>& f, const MlpBlockShape& s, int64_t begin, int64_t end) {
  const MlpBlockWeights<T>& w = f.weights;
  TileScratch<T> columns(4 * s.width + 2 * s.hidden);
  Lanes<T>* h = columns.data();
  Lanes<T>* m = h + s.width;
  Lanes<T>* n = m + s.width;
  Lanes<T>* y = n + s.width;
  Lanes<T>* a = y + s.width;
  Lanes<T>* g = a + s.hidden;
  for (int64_t row = begin; row < end; row += kTileRows) {
    const int64_t count = std::min(kTileRows, end - row);
    load_tile(f.x + row * s.width, s.width, s.width, count, h);
    load_tile(f.m + row * s.width, s.width, s.width, count, m);
    for (int64_t c = 0; c < s.width; ++c) h[c] += m[c];
    const TileMoments<T> moments = tile_layer_norm_moments<T>(h, s.width, w.eps);
    pre_activation_of(w, s, h, moments, n, a);
    activate_all<ActivationKind::gelu>(tile_numbers<T>(a), tile_numbers<T>(g),
                                       s.hidden * kTileRows);
    tile_linear(g, s.hidden, w.down_weight, w.down_bias, s.width, y);
    for (int64_t c = 0; c < s.width; ++c) y[c] += h[c];
    store_tile(h, s.width, count, f.h + row * s.width, s.width);
    store_tile(y, s.width, count, f.y + row * s.width, s.width);
    store_lanes(moments.mean, count, f.mean + row);
    store_lanes(moments.rstd, count, f.rstd + row);
  }
}

// Scratch of one block's backward: per tile the columns the weight gradients need (∂y, g, ∂a,
// n), one tile's working columns, and the layer norm's per-lane partials.
template <typename T>
struct BackwardScratch {
  TileScratch<T> kept;
  TileScratch<T> work;
  TileScratch<T> sums;
  int64_t per_tile;

  explicit BackwardScratch(const MlpBlockShape& s)
      : kept(kTilesPerBlock * (2 * s.width + 2 * s.hidden)),
        work(3 * s.width + s.hidden),
        sums(std::max(2 * s.width, s.hidden * s.width)),
        per_tile(2 * s.width + 2 * s.hidden) {}

  // Tile t's columns: ∂y [width], n [width], g [hidden], ∂a [hidden].
  Lanes<T>* grad_y(int64_t t) { return kept.data() + t * per_tile; }
};

template <typename T>
void backward_block(const MlpBlockBackward<T>& b, const MlpBlockShape& s, int64_t block,
                    BackwardScratch<T>& scratch) {
  const MlpBlockWeights<T>& w = b.weights;
  Lanes<T>* h = scratch.work.data();
  Lanes<T>* grad_n = h + s.width;
  Lanes<T>* grad_x = grad_n + s.width;
  Lanes<T>* a = grad_x + s.width;
  Lanes<T>* norm_acc = scratch.sums.data();  // ∂weight, then ∂bias, per lane
  std::fill(norm_acc, norm_acc + 2 * s.width, Lanes<T>{});
  const int64_t first = block * kMlpBlockRowsPerBlock;
  const int64_t last = std::min(s.rows, first + kMlpBlockRowsPerBlock);
  int64_t tiles = 0;
  for (int64_t row = first; row < last; row += kTileRows, ++tiles) {
    const int64_t count = std::min(kTileRows, last - row);
    Lanes<T>* grad_y = scratch.grad_y(tiles);
    Lanes<T>* n = grad_y + s.width;
    Lanes<T>* g = n + s.width;
    Lanes<T>* grad_a = g + s.hidden;
    load_tile(b.h + row * s.width, s.width, s.width, count, h);
    load_tile(b.grad_y + row * s.width, s.width, s.width, count, grad_y);
    const TileMoments<T> moments{load_lanes(b.mean + row, count), load_lanes(b.rstd + row, count)};
    pre_activation_of(w, s, h, moments, n, a);
    // ∂g = W_downᵀ ∂y into grad_a; then g = a·Φ(a) and ∂a = ∂g · (Φ(a) + a·φ(a)), sharing Φ
    // (g is what the forward computed, to the bit: the same expression).
    tile_linear_backward_input(grad_y, s.width, w.down_weight, s.hidden, grad_a);
    T* ga = tile_numbers<T>(grad_a);
    T* gv = tile_numbers<T>(g);
    const T* pre = tile_numbers<T>(a);
    for (int64_t j = 0; j < s.hidden * kTileRows; ++j) {
      const T x = pre[j], cdf = normal_cdf(x);
      gv[j] = x * cdf;
      ga[j] = ga[j] * (cdf + x * normal_pdf(x));
    }
    tile_linear_backward_input(grad_a, s.hidden, w.up_weight, s.width, grad_n);
    tile_layer_norm_backward(h, grad_n, s.width, moments, w.norm_weight, grad_x, norm_acc,
                             norm_acc + s.width);
    for (int64_t c = 0; c < s.width; ++c) grad_x[c] += grad_y[c];
    store_tile(grad_x, s.width, count, b.grad_h + row * s.width, s.width);
  }
  // The block's partial, in mlp_block_parameter_count's order. Each weight gradient reads one
  // column group of every kept tile: tile t's group sits at a stride of per_tile columns.
  T* partial = b.partials + block * mlp_block_parameter_count(s);
  sum_lanes(norm_acc, 2 * s.width, partial);
  T* up_weight = partial + 2 * s.width;
  T* up_bias = up_weight + s.hidden * s.width;
  T* down_weight = up_bias + s.hidden;
  T* down_bias = down_weight + s.width * s.hidden;
  const Lanes<T>* kept = scratch.kept.data();
  const int64_t stride = scratch.per_tile;
  const TileSeries<T> grad_y{kept, s.width, stride}, n{kept + s.width, s.width, stride},
      g{kept + 2 * s.width, s.hidden, stride},
      grad_a{kept + 2 * s.width + s.hidden, s.hidden, stride};
  tile_weight_gradient(grad_a, n, tiles, scratch.sums.data(), up_weight);
  tile_column_sums(grad_a, tiles, scratch.sums.data(), up_bias);
  tile_weight_gradient(grad_y, g, tiles, scratch.sums.data(), down_weight);
  tile_column_sums(grad_y, tiles, scratch.sums.data(), down_bias);
}

template <typename T>
void backward_blocks(const MlpBlockBackward<T>& b, const MlpBlockShape& s, int64_t begin,
                     int64_t end) {
  BackwardScratch<T> scratch(s);
  for (int64_t block = begin; block < end; ++block) backward_block(b, s, block, scratch);
}

}  // namespace

void mlp_block_forward_cpu(const MlpBlockForward<float>& args, MlpBlockShape shape, int64_t begin,
                           int64_t end) {
  forward_rows(args, shape, begin, end);
}
void mlp_block_forward_cpu(const MlpBlockForward<double>& args, MlpBlockShape shape, int64_t begin,
                           int64_t end) {
  forward_rows(args, shape, begin, end);
}
void mlp_block_backward_cpu(const MlpBlockBackward<float>& args, MlpBlockShape shape, int64_t begin,
                            int64_t end) {
  backward_blocks(args, shape, begin, end);
}
void mlp_block_backward_cpu(const MlpBlockBackward<double>& args, MlpBlockShape shape,
                            int64_t begin, int64_t end) {
  backward_blocks(args, shape, begin, end);
}

}  // namespace memscript::kernels
