#include <algorithm>
#include <vector>

#include "kernels/common/channel_groups.h"
#include "kernels/common/layer_norm_tile.h"
#include "kernels/common/row_tile.h"
#include "kernels/gated_block/gated_block.h"

namespace memscript::kernels {

namespace {

int64_t rows_in(const GatedBlockShape& s, int64_t group) {
  return std::min(kTileRows, s.batch - group * kTileRows);
}

template <typename T>
void activate_column(Lanes<T>* column, GateActivation<T> gate) {
  T* __restrict v = tile_numbers<T>(column);
  for (int64_t r = 0; r < kTileRows; ++r) v[r] = activate(v[r], gate);
}

// The gates' values from their pre-activations, in place: qLSTM's f, i, z, o; minGRU's z (its
// candidate h̃ is the pre-activation itself).
template <typename T>
void activate_gates(const GatedBlockWeights<T>& w, int64_t hidden, Lanes<T>* gates) {
  for (int64_t c = 0; c < hidden; ++c) {
    if (w.kind == GatedCellKind::qlstm) {
      const T bias = w.forget_bias ? w.forget_bias[c] : T(0);
      activate_column(gates + c, forget_gate<T>(bias, w.negative));
      activate_column(gates + hidden + c, sigmoid_gate<T>());
      activate_column(gates + 2 * hidden + c, tanh_gate<T>());
      activate_column(gates + 3 * hidden + c, sigmoid_gate<T>());
    } else {
      activate_column(gates + c, sigmoid_gate<T>());
    }
  }
}

// The loops below take one channel's columns as separate restrict pointers: they are distinct
// columns, and only so does the compiler turn each loop over lanes into vector instructions.

template <typename T>
void qlstm_step_lanes(const T* __restrict f, const T* __restrict i, const T* __restrict z,
                      const T* __restrict o, T* __restrict state, T* __restrict h) {
  for (int64_t r = 0; r < kTileRows; ++r) {
    state[r] = qlstm_state(f[r], i[r], z[r], state[r]);
    h[r] = qlstm_output(o[r], state[r]);
  }
}

template <typename T>
void mingru_step_lanes(const T* __restrict z, const T* __restrict candidate, bool negative,
                       T* __restrict state, T* __restrict h) {
  for (int64_t r = 0; r < kTileRows; ++r) {
    state[r] = mingru_state(z[r], candidate[r], state[r], negative);
    h[r] = state[r];
  }
}

// h = o · tanh(c) as qlstm_output computes it, keeping tanh(c) for the backward.
template <typename T>
void qlstm_output_lanes(const T* __restrict o, const T* __restrict state, T* __restrict tanh_c,
                        T* __restrict h) {
  for (int64_t r = 0; r < kTileRows; ++r) {
    tanh_c[r] = tanh_of(state[r]);
    h[r] = o[r] * tanh_c[r];
  }
}

// Channel c's columns: slot s of the gates (or of their gradients) at s · hidden + c.
template <typename T>
struct ChannelColumns {
  Lanes<T>* base;
  int64_t hidden;
  int64_t c;
  T* slot(int64_t s) const { return tile_numbers<T>(base + s * hidden + c); }
};

// One step of the cell: state c_{t-1} → c_t in place, and the cell's output h_t.
template <typename T>
void cell_step(const GatedBlockWeights<T>& w, int64_t hidden, Lanes<T>* gates, Lanes<T>* state,
               Lanes<T>* h) {
  for (int64_t c = 0; c < hidden; ++c) {
    const ChannelColumns<T> g{gates, hidden, c};
    T* s = tile_numbers<T>(state + c);
    T* out = tile_numbers<T>(h + c);
    if (w.kind == GatedCellKind::qlstm) {
      qlstm_step_lanes(g.slot(0), g.slot(1), g.slot(2), g.slot(3), s, out);
    } else {
      mingru_step_lanes(g.slot(0), g.slot(1), w.negative, s, out);
    }
  }
}

// The cell's output h_t again, from the gates and c_t, for the output projection's gradient;
// for qLSTM also tanh(c_t), which its backward needs too.
template <typename T>
void cell_output(const GatedBlockWeights<T>& w, int64_t hidden, Lanes<T>* gates,
                 const Lanes<T>* state, Lanes<T>* tanh_c, Lanes<T>* h) {
  if (w.kind == GatedCellKind::mingru) {
    std::copy(state, state + hidden, h);
    return;
  }
  for (int64_t c = 0; c < hidden; ++c) {
    qlstm_output_lanes(ChannelColumns<T>{gates, hidden, c}.slot(3), tile_numbers<T>(state + c),
                       tile_numbers<T>(tanh_c + c), tile_numbers<T>(h + c));
  }
}

// What one channel's backward reads: its gates, c_t (qLSTM: tanh(c_t)), c_{t-1} and ∂h_t.
template <typename T>
struct ChannelBackwardInputs {
  ChannelColumns<T> gates;
  const T* state;
  const T* previous;
  const T* grad_h;
};

template <typename T>
void qlstm_backward_lanes(const ChannelBackwardInputs<T>& in, GateActivation<T> forget,
                          T* __restrict carry, T* __restrict gf, T* __restrict gi, T* __restrict gz,
                          T* __restrict go) {
  const T *__restrict f = in.gates.slot(0), *__restrict i = in.gates.slot(1),
                      *__restrict z = in.gates.slot(2), *__restrict o = in.gates.slot(3);
  const T* __restrict tanh_c = in.state, * __restrict p = in.previous, * __restrict gh = in.grad_h;
  for (int64_t r = 0; r < kTileRows; ++r) {
    const QlstmOutputGrads<T> out = qlstm_output_grads_of_tanh(o[r], tanh_c[r], gh[r]);
    const T grad_c = out.state + carry[r];
    gf[r] = grad_c * p[r] * activation_slope(f[r], forget);
    gi[r] = grad_c * z[r] * activation_slope(i[r], sigmoid_gate<T>());
    gz[r] = grad_c * i[r] * activation_slope(z[r], tanh_gate<T>());
    go[r] = out.pre_o;
    carry[r] = grad_c * f[r];
  }
}

template <typename T>
void mingru_backward_lanes(const ChannelBackwardInputs<T>& in, bool negative, T* __restrict carry,
                           T* __restrict gz, T* __restrict gc) {
  const T* __restrict z = in.gates.slot(0), * __restrict candidate = in.gates.slot(1);
  const T* __restrict p = in.previous, * __restrict gh = in.grad_h;
  for (int64_t r = 0; r < kTileRows; ++r) {
    const T grad = gh[r] + carry[r];
    gz[r] = mingru_grad_pre_z(z[r], candidate[r], p[r], grad, negative);
    gc[r] = grad * z[r];
    carry[r] = grad * mingru_keep(z[r], negative);
  }
}

// The cell's backward at one step: from ∂h_t and the carry into c_t, the pre-activations'
// gradient, and the carry into c_{t-1} (in place). gated_scan.h's expressions. `state` is c_t,
// or for qLSTM tanh(c_t) (all its backward reads of c_t).
template <typename T>
void cell_backward(const GatedBlockWeights<T>& w, int64_t hidden, Lanes<T>* gates,
                   const Lanes<T>* state, const Lanes<T>* previous, const Lanes<T>* grad_h,
                   Lanes<T>* carry, Lanes<T>* grad_pre) {
  for (int64_t c = 0; c < hidden; ++c) {
    const ChannelBackwardInputs<T> in{{gates, hidden, c},
                                      tile_numbers<T>(state + c),
                                      tile_numbers<T>(previous + c),
                                      tile_numbers<T>(grad_h + c)};
    const ChannelColumns<T> g{grad_pre, hidden, c};
    T* k = tile_numbers<T>(carry + c);
    if (w.kind == GatedCellKind::qlstm) {
      const GateActivation<T> forget =
          forget_gate<T>(w.forget_bias ? w.forget_bias[c] : T(0), w.negative);
      qlstm_backward_lanes(in, forget, k, g.slot(0), g.slot(1), g.slot(2), g.slot(3));
    } else {
      mingru_backward_lanes(in, w.negative, k, g.slot(0), g.slot(1));
    }
  }
}

// acc[o · in + i] += g[o] · x[i]: one step's share of a weight gradient, per lane.
template <typename T>
void add_outer_product(const Lanes<T>* __restrict g, int64_t out, const Lanes<T>* __restrict x,
                       int64_t in, Lanes<T>* __restrict acc) {
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) acc[o * in + i] += g[o] * x[i];
  }
}

template <typename T>
void add_columns(const Lanes<T>* __restrict g, int64_t count, Lanes<T>* __restrict acc) {
  for (int64_t j = 0; j < count; ++j) acc[j] += g[j];
}

// The n_t and activated gates of one step from its x_t: what forward and backward compute alike.
template <typename T>
TileMoments<T> gates_of_step(const GatedBlockWeights<T>& w, const GatedBlockShape& s,
                             const Lanes<T>* x, Lanes<T>* n, Lanes<T>* gates) {
  const TileMoments<T> moments = tile_layer_norm_moments<T>(x, s.width, w.eps);
  tile_layer_norm_apply(x, s.width, moments, w.norm_weight, w.norm_bias, n);
  tile_linear(n, s.width, w.in_weight, w.in_bias, gated_slots(w.kind) * s.hidden, gates);
  activate_gates(w, s.hidden, gates);
  return moments;
}

// The steps are taken kChunkSteps at a time: each lane's numbers of a chunk are one contiguous
// piece of its batch row, copied between the row and the chunk's columns in one go
// (gather_lane_rows / scatter_lane_rows). Step by step, the group's rows would be read a few
// numbers at a time at a stride of length · width, a power of two at the usual lengths: all in
// one cache set, evicting each other.
constexpr int64_t kChunkSteps = 16;

// A group's view of [batch, length, columns] arrays: its lanes' rows at step t0, lanes past
// the batch reading a row of zeros (so that they add nothing to the parameter gradients).
template <typename T>
class GroupRows {
 public:
  GroupRows(const GatedBlockShape& s, int64_t group)
      : s_(s),
        first_(group * kTileRows),
        count_(rows_in(s, group)),
        zeros_(static_cast<size_t>((kChunkSteps + 1) * std::max(s.width, s.hidden))) {}

  // Columns [0, steps · columns) of `tile`: step k's number j at column k · columns + j.
  void gather(const T* array, int64_t columns, int64_t t0, int64_t steps, Lanes<T>* tile) const {
    gather_rows(array + t0 * columns, s_.length * columns, steps * columns, tile);
  }
  void scatter(const Lanes<T>* tile, int64_t columns, int64_t t0, int64_t steps, T* array) const {
    scatter_rows(tile, steps * columns, array + t0 * columns, s_.length * columns);
  }

  // A [batch, hidden] state's rows, or zeros where `state` is null.
  void gather_state(const T* state, Lanes<T>* tile) const {
    if (!state) {
      std::fill(tile, tile + s_.hidden, Lanes<T>{});
      return;
    }
    gather_rows(state, s_.hidden, s_.hidden, tile);
  }
  void scatter_state(const Lanes<T>* tile, T* state) const {
    scatter_rows(tile, s_.hidden, state, s_.hidden);
  }

 private:
  // `width` numbers of each lane's row; batch row n's start at origin + n · stride.
  void gather_rows(const T* origin, int64_t stride, int64_t width, Lanes<T>* tile) const {
    const T* rows[kTileRows];
    for (int64_t l = 0; l < kTileRows; ++l)
      rows[l] = l < count_ ? origin + (first_ + l) * stride : zeros_.data();
    gather_lane_rows(rows, width, tile);
  }
  void scatter_rows(const Lanes<T>* tile, int64_t width, T* origin, int64_t stride) const {
    T* rows[kTileRows] = {};
    for (int64_t l = 0; l < count_; ++l) rows[l] = origin + (first_ + l) * stride;
    scatter_lane_rows(tile, width, count_, rows);
  }

  const GatedBlockShape& s_;
  int64_t first_;
  int64_t count_;
  std::vector<T> zeros_;
};

template <typename T>
void forward_group(const GatedBlockForward<T>& f, const GatedBlockShape& s, int64_t group) {
  const GatedBlockWeights<T>& w = f.weights;
  const int64_t width = s.width, hidden = s.hidden, gates = gated_slots(w.kind) * hidden;
  const GroupRows<T> rows(s, group);
  TileScratch<T> scratch(kChunkSteps * (2 * width + hidden) + width + gates + 2 * hidden);
  Lanes<T>* x = scratch.data();  // the chunk's x, y and states, step after step
  Lanes<T>* y = x + kChunkSteps * width;
  Lanes<T>* states = y + kChunkSteps * width;
  Lanes<T>* n = states + kChunkSteps * hidden;
  Lanes<T>* pre = n + width;
  Lanes<T>* state = pre + gates;
  Lanes<T>* h = state + hidden;
  rows.gather_state(f.initial, state);
  for_chunks<kChunkSteps>(s.length, [&](int64_t t0, int64_t steps) {
    rows.gather(f.x, width, t0, steps, x);
    for (int64_t k = 0; k < steps; ++k) {
      gates_of_step(w, s, x + k * width, n, pre);
      cell_step(w, hidden, pre, state, h);
      tile_linear(h, hidden, w.out_weight, w.out_bias, width, y + k * width);
      std::copy(state, state + hidden, states + k * hidden);
    }
    rows.scatter(y, width, t0, steps, f.y);
    rows.scatter(states, hidden, t0, steps, f.states);
  });
  if (f.last) rows.scatter_state(state, f.last);
}

// A group's parameter-gradient accumulators, one column per parameter in
// gated_block_parameter_count's order.
template <typename T>
struct Accumulators {
  TileScratch<T> columns;
  Lanes<T>*norm_weight, *norm_bias, *in_weight, *in_bias, *out_weight, *out_bias;

  Accumulators(GatedCellKind kind, const GatedBlockShape& s)
      : columns(gated_block_parameter_count(kind, s)) {
    const int64_t gates = gated_slots(kind) * s.hidden;
    norm_weight = columns.data();
    norm_bias = norm_weight + s.width;
    in_weight = norm_bias + s.width;
    in_bias = in_weight + gates * s.width;
    out_weight = in_bias + gates;
    out_bias = out_weight + s.width * s.hidden;
  }
};

// One step of the backward: from x_t, c_t, c_{t-1} and ∂y_t (and the carry into c_t), ∂x_t, the
// carry into c_{t-1}, and the step's share of every parameter gradient.
template <typename T>
struct BackwardStep {
  const Lanes<T>* x;
  const Lanes<T>* state;
  const Lanes<T>* previous;
  const Lanes<T>* grad_y;
  Lanes<T>* grad_x;
};

// Working columns of one backward step.
template <typename T>
struct BackwardWork {
  Lanes<T>* n;         // [width]
  Lanes<T>* gates;     // [slots · hidden]
  Lanes<T>* grad_pre;  // [slots · hidden]
  Lanes<T>* grad_n;    // [width]
  Lanes<T>* h;         // [hidden]
  Lanes<T>* grad_h;    // [hidden]
  Lanes<T>* tanh_c;    // [hidden], qLSTM's tanh(c_t)
};

template <typename T>
void backward_step(const GatedBlockWeights<T>& w, const GatedBlockShape& s,
                   const BackwardStep<T>& step, const BackwardWork<T>& work, Lanes<T>* carry,
                   Accumulators<T>& acc) {
  const int64_t width = s.width, hidden = s.hidden, gates = gated_slots(w.kind) * hidden;
  const TileMoments<T> moments = gates_of_step(w, s, step.x, work.n, work.gates);
  cell_output(w, hidden, work.gates, step.state, work.tanh_c, work.h);
  add_outer_product<T>(step.grad_y, width, work.h, hidden, acc.out_weight);
  add_columns<T>(step.grad_y, width, acc.out_bias);
  tile_linear_backward_input(step.grad_y, width, w.out_weight, hidden, work.grad_h);
  const Lanes<T>* state = w.kind == GatedCellKind::qlstm ? work.tanh_c : step.state;
  cell_backward(w, hidden, work.gates, state, step.previous, work.grad_h, carry, work.grad_pre);
  add_outer_product<T>(work.grad_pre, gates, work.n, width, acc.in_weight);
  add_columns<T>(work.grad_pre, gates, acc.in_bias);
  tile_linear_backward_input(work.grad_pre, gates, w.in_weight, width, work.grad_n);
  tile_layer_norm_backward(step.x, work.grad_n, width, moments, w.norm_weight, step.grad_x,
                           acc.norm_weight, acc.norm_bias);
}

template <typename T>
void backward_group(const GatedBlockBackward<T>& b, const GatedBlockShape& s, int64_t group) {
  const GatedBlockWeights<T>& w = b.weights;
  const int64_t width = s.width, hidden = s.hidden, gates = gated_slots(w.kind) * hidden;
  const GroupRows<T> rows(s, group);
  TileScratch<T> scratch(kChunkSteps * (3 * width + hidden) + hidden + 2 * width + 2 * gates +
                         4 * hidden);
  Lanes<T>* x = scratch.data();  // the chunk's x, ∂y, ∂x and states, step after step
  Lanes<T>* grad_y = x + kChunkSteps * width;
  Lanes<T>* grad_x = grad_y + kChunkSteps * width;
  Lanes<T>* before = grad_x + kChunkSteps * width;  // the state before the chunk, then its states
  Lanes<T>* states = before + hidden;
  Lanes<T>* n = states + kChunkSteps * hidden;
  Lanes<T>* pre = n + width;
  const BackwardWork<T> work{n,
                             pre,
                             pre + gates,
                             pre + 2 * gates,
                             pre + 2 * gates + width,
                             pre + 2 * gates + width + hidden,
                             pre + 2 * gates + width + 2 * hidden};
  Lanes<T>* carry = work.tanh_c + hidden;  // ∂loss/∂c_t from the steps after t
  Accumulators<T> acc(w.kind, s);
  rows.gather_state(b.grad_last, carry);
  for_chunks_in_reverse<kChunkSteps>(s.length, [&](int64_t t0, int64_t steps) {
    rows.gather(b.x, width, t0, steps, x);
    rows.gather(b.grad_y, width, t0, steps, grad_y);
    if (t0 > 0) {
      rows.gather(b.states, hidden, t0 - 1, steps + 1, before);
    } else {
      rows.gather_state(b.initial, before);
      rows.gather(b.states, hidden, 0, steps, states);
    }
    for (int64_t k = steps - 1; k >= 0; --k) {
      const BackwardStep<T> step{x + k * width, states + k * hidden, before + k * hidden,
                                 grad_y + k * width, grad_x + k * width};
      backward_step(w, s, step, work, carry, acc);
    }
    rows.scatter(grad_x, width, t0, steps, b.grad_x);
  });
  if (b.grad_initial) rows.scatter_state(carry, b.grad_initial);
  const int64_t parameters = gated_block_parameter_count(w.kind, s);
  sum_lanes(acc.columns.data(), parameters, b.partials + group * parameters);
}

}  // namespace

void gated_block_forward_cpu(const GatedBlockForward<float>& args, GatedBlockShape shape,
                             int64_t begin, int64_t end) {
  for (int64_t group = begin; group < end; ++group) forward_group(args, shape, group);
}
void gated_block_forward_cpu(const GatedBlockForward<double>& args, GatedBlockShape shape,
                             int64_t begin, int64_t end) {
  for (int64_t group = begin; group < end; ++group) forward_group(args, shape, group);
}
void gated_block_backward_cpu(const GatedBlockBackward<float>& args, GatedBlockShape shape,
                              int64_t begin, int64_t end) {
  for (int64_t group = begin; group < end; ++group) backward_group(args, shape, group);
}
void gated_block_backward_cpu(const GatedBlockBackward<double>& args, GatedBlockShape shape,
                              int64_t begin, int64_t end) {
  for (int64_t group = begin; group < end; ++group) backward_group(args, shape, group);
}

}  // namespace memscript::kernels
