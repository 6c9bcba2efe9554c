#pragma once

// The mixer half of a pre-LN decoder block whose mixer is a gated diagonal recurrence
// (gated_scan.h's qLSTM or minGRU cell), in one pass over the sequence:
//
//   n_t = LN(x_t),  pre_t = W_in n_t + b_in,  h_t = cell(pre_t, c_{t-1}),  y_t = W_out h_t + b_out
//
// At the study's widths (d_model 4, hidden 4) the separate nodes (layer norm, input projection,
// scan, output projection) each move [batch · length, ·] arrays between memory and the vector
// lanes, and those moves were most of a training step. Here a lane is one batch row: a group of
// kTileRows batch rows walks the steps together (row_tile.h), each step reading x_t of its rows
// and writing y_t and the cell state c_t, with everything in between in registers. The cells'
// formulas are gated_scan.h's, evaluated lane by lane.
//
// The backward walks the steps in reverse, recomputing n, pre and the gates from x and the
// saved states:
//
//   ∂W_out = Σ ∂y hᵀ,  ∂b_out = Σ ∂y,  ∂h = W_outᵀ ∂y,  (cell backward) → ∂pre, carry into c_{t-1}
//   ∂W_in = Σ ∂pre nᵀ, ∂b_in = Σ ∂pre, ∂n = W_inᵀ ∂pre, ∂x = LN backward of ∂n
//
// qLSTM's forget bias b enters as pre_f + b + 1, so its gradient is the f slot of Σ ∂pre.
// Parameter gradients are sums over batch rows and steps: each group leaves one partial per
// parameter (each lane's steps in reverse order, then the lanes in lane order), and the partials
// are added in group order (block_sum.h): the same bits for any thread count.
//
// CPU only, float32 and float64, for widths up to kGatedBlockMaxWidth: every parameter has a
// gradient accumulator per lane, which must stay in the cache. The runtime composes the separate
// nodes for wider models and on the GPU.

#include <cstdint>

#include "kernels/common/lanes.h"
#include "kernels/gated_scan/gated_scan.h"

namespace memscript::kernels {

constexpr int64_t kGatedBlockMaxWidth = 16;

struct GatedBlockShape {
  int64_t batch;
  int64_t length;
  int64_t width;   // d_model
  int64_t hidden;  // the cell's channels
};

inline bool gated_block_fits(GatedBlockShape shape) {
  return shape.width <= kGatedBlockMaxWidth && shape.hidden <= kGatedBlockMaxWidth;
}

// Groups of kTileRows batch rows: the units of work, and of the parameter gradients' partials.
inline int64_t gated_block_groups(GatedBlockShape shape) {
  return (shape.batch + kTileRows - 1) / kTileRows;
}

// The numbers of one group's parameter-gradient partial, in this order: the layer norm's weight
// and bias [width] each, W_in [slots · hidden, width], Σ ∂pre [slots · hidden] (b_in's gradient;
// its f slot is the forget bias's), W_out [width, hidden], b_out [width].
inline int64_t gated_block_parameter_count(GatedCellKind kind, GatedBlockShape shape) {
  const int64_t pre = gated_slots(kind) * shape.hidden;
  return 2 * shape.width + pre * shape.width + pre + shape.width * shape.hidden + shape.width;
}

template <typename T>
struct GatedBlockWeights {
  GatedCellKind kind;
  bool negative;         // negative eigenvalues (gated_scan.h)
  const T* norm_weight;  // [width]
  const T* norm_bias;    // [width]
  double eps;
  const T* in_weight;    // [slots · hidden, width], slot s of channel c at row s · hidden + c
  const T* in_bias;      // [slots · hidden], or null
  const T* forget_bias;  // [hidden] for qLSTM, or null
  const T* out_weight;   // [width, hidden]
  const T* out_bias;     // [width], or null
};

template <typename T>
struct GatedBlockForward {
  GatedBlockWeights<T> weights;
  const T* x;        // [batch, length, width]
  const T* initial;  // [batch, hidden], or null: zero state
  T* y;              // [batch, length, width]
  T* states;         // [batch, length, hidden], kept for the backward
  T* last;           // [batch, hidden], or null
};

template <typename T>
struct GatedBlockBackward {
  GatedBlockWeights<T> weights;
  const T* x;
  const T* initial;
  const T* states;     // from the forward
  const T* grad_y;     // [batch, length, width]
  const T* grad_last;  // [batch, hidden], or null
  T* grad_x;           // [batch, length, width]
  T* grad_initial;     // [batch, hidden], or null
  T* partials;         // [gated_block_groups(shape), gated_block_parameter_count(kind, shape)]
};

// Groups [begin, end).
void gated_block_forward_cpu(const GatedBlockForward<float>& args, GatedBlockShape shape,
                             int64_t begin, int64_t end);
void gated_block_forward_cpu(const GatedBlockForward<double>& args, GatedBlockShape shape,
                             int64_t begin, int64_t end);
void gated_block_backward_cpu(const GatedBlockBackward<float>& args, GatedBlockShape shape,
                              int64_t begin, int64_t end);
void gated_block_backward_cpu(const GatedBlockBackward<double>& args, GatedBlockShape shape,
                              int64_t begin, int64_t end);

}  // namespace memscript::kernels
