#pragma once

// Layer normalization over the last axis of a contiguous [rows, width] array, the decoder's
// pre-norm before every mixer and MLP:
//   mean = Σ x / width,  rstd = 1 / sqrt(Σ (x − mean)² / width + eps)
//   x̂ = (x − mean) · rstd,  y = x̂ · weight + bias
//
// Backward, with g = dLoss/dy and gw = g · weight:
//   dx = rstd · (gw − mean(gw) − x̂ · mean(gw · x̂))      (per row)
//   dweight = Σ_rows g · x̂,  dbias = Σ_rows g           (over rows)
//
// Rows go through in tiles of kTileRows (row_tile.h), each row in its own vector lane, its sums
// in T in column order. The sums over rows, the parameter gradients, add fixed blocks of
// kLayerNormRowsPerBlock rows each (any thread may take any block; within a block each lane's
// rows in order, then the lanes in order) and then the blocks in order (block_sum.h), so the
// gradients are the same bits with one thread or many.

#include <cstdint>

namespace memscript::kernels {

struct LayerNormShape {
  int64_t rows;
  int64_t width;
};

constexpr int64_t kLayerNormRowsPerBlock = 256;

inline int64_t layer_norm_blocks(LayerNormShape shape) {
  return (shape.rows + kLayerNormRowsPerBlock - 1) / kLayerNormRowsPerBlock;
}

template <typename T>
struct LayerNormForward {
  const T* x;       // [rows, width]
  const T* weight;  // [width]
  const T* bias;    // [width]
  double eps;
  T* y;     // [rows, width]
  T* mean;  // [rows], kept for the backward
  T* rstd;  // [rows], kept for the backward
};

template <typename T>
struct LayerNormBackward {
  const T* x;       // [rows, width]
  const T* weight;  // [width]
  const T* mean;    // [rows], from the forward
  const T* rstd;    // [rows], from the forward
  const T* grad_y;  // [rows, width]
  T* grad_x;        // [rows, width]
  // [layer_norm_blocks(shape), width] each: one partial sum of the parameter gradients per
  // block of rows, which sum_blocks_cpu (block_sum.h) adds up in order.
  T* weight_partials;
  T* bias_partials;
};

// Rows [begin, end).
void layer_norm_forward_cpu(const LayerNormForward<float>& args, LayerNormShape shape,
                            int64_t begin, int64_t end);
void layer_norm_forward_cpu(const LayerNormForward<double>& args, LayerNormShape shape,
                            int64_t begin, int64_t end);

// Blocks of rows [begin, end): grad_x for their rows and their parameter-gradient partials.
void layer_norm_backward_cpu(const LayerNormBackward<float>& args, LayerNormShape shape,
                             int64_t begin_block, int64_t end_block);
void layer_norm_backward_cpu(const LayerNormBackward<double>& args, LayerNormShape shape,
                             int64_t begin_block, int64_t end_block);

}  // namespace memscript::kernels
