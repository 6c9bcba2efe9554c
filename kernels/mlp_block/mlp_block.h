#pragma once

// The second half of a pre-LN decoder block, after its mixer, in one pass over the rows:
//
//   h = x + m                      (m: the mixer's output joining the residual stream x)
//   n = LN(h),  a = W_up n + b_up,  g = gelu(a),  y = h + W_down g + b_down
//
// At the decoder's small widths these are memory-bound passes when run as separate ops (each
// reads and writes a whole [rows, width] array); here each tile of rows (row_tile.h) goes
// through all of them in registers and cache, and only h, y and the layer norm's statistics
// are written. The backward recomputes n, a and g from h:
//
//   ∂W_down = Σ ∂y gᵀ,  ∂b_down = Σ ∂y,  ∂g = W_downᵀ ∂y,  ∂a = ∂g · gelu'(a)
//   ∂W_up = Σ ∂a nᵀ,    ∂b_up = Σ ∂a,    ∂n = W_upᵀ ∂a,   ∂h = ∂y + LN backward of ∂n
//
// and ∂x = ∂m = ∂h. Parameter gradients are sums over rows: each fixed block of
// kMlpBlockRowsPerBlock rows leaves one partial per parameter (each lane's rows in order, then
// the lanes in order) and the partials are added in block order (block_sum.h), so they are the
// same bits for any thread count. CPU only, float32 and float64; the runtime composes the
// separate ops elsewhere.

#include <cstdint>

namespace memscript::kernels {

struct MlpBlockShape {
  int64_t rows;
  int64_t width;   // d_model
  int64_t hidden;  // the MLP's inner width
};

constexpr int64_t kMlpBlockRowsPerBlock = 256;

inline int64_t mlp_block_blocks(MlpBlockShape shape) {
  return (shape.rows + kMlpBlockRowsPerBlock - 1) / kMlpBlockRowsPerBlock;
}

// The numbers of one block's parameter-gradient partial, in this order: the layer norm's
// weight and bias [width] each, W_up [hidden, width], b_up [hidden], W_down [width, hidden],
// b_down [width].
inline int64_t mlp_block_parameter_count(MlpBlockShape shape) {
  return 2 * shape.width + shape.hidden * shape.width + shape.hidden + shape.width * shape.hidden +
         shape.width;
}

template <typename T>
struct MlpBlockWeights {
  const T* norm_weight;  // [width]
  const T* norm_bias;    // [width]
  double eps;
  const T* up_weight;    // [hidden, width]
  const T* up_bias;      // [hidden]
  const T* down_weight;  // [width, hidden]
  const T* down_bias;    // [width]
};

template <typename T>
struct MlpBlockForward {
  MlpBlockWeights<T> weights;
  const T* x;  // [rows, width]
  const T* m;  // [rows, width]
  T* h;        // [rows, width], kept for the backward
  T* y;        // [rows, width]
  T* mean;     // [rows], kept for the backward
  T* rstd;     // [rows], kept for the backward
};

template <typename T>
struct MlpBlockBackward {
  MlpBlockWeights<T> weights;
  const T* h;
  const T* mean;
  const T* rstd;
  const T* grad_y;  // [rows, width]
  T* grad_h;        // [rows, width]: the gradient of both x and m
  T* partials;      // [mlp_block_blocks(shape), mlp_block_parameter_count(shape)]
};

// Rows [begin, end).
void mlp_block_forward_cpu(const MlpBlockForward<float>& args, MlpBlockShape shape, int64_t begin,
                           int64_t end);
void mlp_block_forward_cpu(const MlpBlockForward<double>& args, MlpBlockShape shape, int64_t begin,
                           int64_t end);

// Blocks of rows [begin, end): grad_h of their rows and their partials.
void mlp_block_backward_cpu(const MlpBlockBackward<float>& args, MlpBlockShape shape, int64_t begin,
                            int64_t end);
void mlp_block_backward_cpu(const MlpBlockBackward<double>& args, MlpBlockShape shape,
                            int64_t begin, int64_t end);

}  // namespace memscript::kernels
