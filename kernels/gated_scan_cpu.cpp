#include <algorithm>
#include <vector>

#include "gated_scan.h"

namespace memscript::kernels {

namespace {

// Steps per chunk: the chunk's gates stay in a small scratch between the passes.
constexpr int64_t kChunk = 32;

// The activation of every column of a [slots · hidden] pre-activation row, as separate arrays
// so that the pass over a row vectorizes.
template <typename T>
struct ColumnGates {
  std::vector<T> scale, slope, offset, shift;

  void set(int64_t column, GateActivation<T> g) {
    scale[column] = g.scale;
    slope[column] = g.slope;
    offset[column] = g.offset;
    shift[column] = g.shift;
  }
  GateActivation<T> at(int64_t column) const {
    return {scale[column], slope[column], offset[column], shift[column]};
  }
};

template <typename T>
ColumnGates<T> qlstm_columns(const GatedScanForward<T>& a, int64_t hidden) {
  const auto width = static_cast<size_t>(4 * hidden);
  ColumnGates<T> g{std::vector<T>(width), std::vector<T>(width), std::vector<T>(width),
                   std::vector<T>(width)};
  for (int64_t c = 0; c < hidden; ++c) {
    g.set(c, forget_gate<T>(a.bias ? a.bias[c] : T(0), a.negative));
    g.set(hidden + c, sigmoid_gate<T>());
    g.set(2 * hidden + c, tanh_gate<T>());
    g.set(3 * hidden + c, sigmoid_gate<T>());
  }
  return g;
}

// gates[t][m] = activate(pre[t][m]) for the chunk's rows.
template <typename T>
void activate_rows(const T* __restrict pre, const ColumnGates<T>& g, int64_t steps, int64_t width,
                   T* __restrict gates) {
  const T* __restrict scale = g.scale.data();
  const T* __restrict slope = g.slope.data();
  const T* __restrict offset = g.offset.data();
  const T* __restrict shift = g.shift.data();
  for (int64_t t = 0; t < steps; ++t) {
    const T* x = pre + t * width;
    T* y = gates + t * width;
    for (int64_t m = 0; m < width; ++m)
      y[m] = scale[m] * sigmoid_of(slope[m] * (x[m] + shift[m])) + offset[m];
  }
}

// Calls body(t0, steps) for the chunks of a row's sequence, first to last or last to first.
template <typename F>
void for_chunks(int64_t length, F&& body) {
  for (int64_t t0 = 0; t0 < length; t0 += kChunk) body(t0, std::min(kChunk, length - t0));
}
template <typename F>
void for_chunks_in_reverse(int64_t length, F&& body) {
  for (int64_t t0 = (length - 1) / kChunk * kChunk; t0 >= 0; t0 -= kChunk)
    body(t0, std::min(kChunk, length - t0));
}

// The running state of one batch row in the forward: the initial state, or zeros.
template <typename T>
std::vector<T> initial_state(const GatedScanForward<T>& a, int64_t hidden, int64_t n) {
  std::vector<T> state(static_cast<size_t>(hidden), T(0));
  if (a.initial) std::copy(a.initial + n * hidden, a.initial + (n + 1) * hidden, state.begin());
  return state;
}

// What the backward of one batch row carries across its chunks: the gradient flowing into the
// state before the current chunk (from grad_last at the start), and the states before each step.
template <typename T>
struct RowBackward {
  int64_t hidden;
  std::vector<T> carry, zeros;
  const T* initial;  // this row's initial state, or null
  const T* states;   // this row's states [length, hidden]

  RowBackward(const GatedScanBackward<T>& a, GatedScanShape shape, int64_t n)
      : hidden(shape.hidden),
        carry(static_cast<size_t>(shape.hidden), T(0)),
        zeros(carry),
        initial(a.initial ? a.initial + n * shape.hidden : nullptr),
        states(a.states + n * shape.length * shape.hidden) {
    if (a.grad_last)
      std::copy(a.grad_last + n * hidden, a.grad_last + (n + 1) * hidden, carry.begin());
  }
  // The state before step t: the previous step's, the initial one, or zero.
  const T* previous(int64_t t) const {
    if (t > 0) return states + (t - 1) * hidden;
    return initial ? initial : zeros.data();
  }
  void write_initial_gradient(const GatedScanBackward<T>& a, int64_t n) const {
    if (a.grad_initial) std::copy(carry.begin(), carry.end(), a.grad_initial + n * hidden);
  }
};

template <typename T>
void qlstm_forward_row(const GatedScanForward<T>& a, GatedScanShape shape,
                       const ColumnGates<T>& columns, int64_t n, std::vector<T>& scratch) {
  const int64_t hidden = shape.hidden, width = 4 * hidden;
  std::vector<T> state = initial_state(a, hidden, n);
  T* __restrict h = state.data();
  for_chunks(shape.length, [&](int64_t t0, int64_t steps) {
    const int64_t row = n * shape.length + t0;
    T* gates = scratch.data();
    activate_rows(a.pre + row * width, columns, steps, width, gates);
    for (int64_t t = 0; t < steps; ++t) {
      const T* __restrict g = gates + t * width;
      T* __restrict states = a.states + (row + t) * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        h[c] = qlstm_state(g[c], g[hidden + c], g[2 * hidden + c], h[c]);
        states[c] = h[c];
      }
    }
    for (int64_t t = 0; t < steps; ++t) {
      const T* __restrict o = gates + t * width + 3 * hidden;
      const T* __restrict states = a.states + (row + t) * hidden;
      T* __restrict outputs = a.outputs + (row + t) * hidden;
      for (int64_t c = 0; c < hidden; ++c) outputs[c] = qlstm_output(o[c], states[c]);
    }
  });
  if (a.last) std::copy(h, h + hidden, a.last + n * hidden);
}

template <typename T>
void qlstm_backward_row(const GatedScanBackward<T>& a, GatedScanShape shape,
                        const ColumnGates<T>& columns, int64_t n, std::vector<T>& scratch) {
  const int64_t hidden = shape.hidden, width = 4 * hidden;
  RowBackward<T> back(a, shape, n);
  T* __restrict carry = back.carry.data();
  for_chunks_in_reverse(shape.length, [&](int64_t t0, int64_t steps) {
    const int64_t row = n * shape.length + t0;
    T* gates = scratch.data();
    T* grad_c = scratch.data() + kChunk * width;  // [steps, hidden]
    activate_rows(a.pre + row * width, columns, steps, width, gates);
    // What the outputs hand back, to c_t and to o.
    for (int64_t t = 0; t < steps; ++t) {
      const T* __restrict o = gates + t * width + 3 * hidden;
      const T* __restrict states = a.states + (row + t) * hidden;
      const T* __restrict grad_y = a.grad_outputs + (row + t) * hidden;
      T* __restrict grad_o = a.grad_pre + (row + t) * width + 3 * hidden;
      T* __restrict local = grad_c + t * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        const QlstmOutputGrads<T> out = qlstm_output_grads(o[c], states[c], grad_y[c]);
        local[c] = out.state;
        grad_o[c] = out.pre_o;
      }
    }
    // The carry through the forget gates, step by step in reverse.
    for (int64_t t = steps - 1; t >= 0; --t) {
      const T* __restrict f = gates + t * width;
      T* __restrict g = grad_c + t * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        g[c] = g[c] + carry[c];
        carry[c] = g[c] * f[c];
      }
    }
    for (int64_t t = 0; t < steps; ++t) {
      const T* __restrict gate = gates + t * width;
      const T* __restrict g = grad_c + t * hidden;
      const T* __restrict previous = back.previous(t0 + t);
      T* __restrict grad_pre = a.grad_pre + (row + t) * width;
      for (int64_t c = 0; c < hidden; ++c) {
        const T f = gate[c], i = gate[hidden + c], z = gate[2 * hidden + c];
        grad_pre[c] = g[c] * previous[c] * activation_slope(f, columns.at(c));
        grad_pre[hidden + c] = g[c] * z * activation_slope(i, sigmoid_gate<T>());
        grad_pre[2 * hidden + c] = g[c] * i * activation_slope(z, tanh_gate<T>());
      }
    }
  });
  back.write_initial_gradient(a, n);
}

// z = σ(pre_z) for the chunk's rows, [steps, hidden].
template <typename T>
void mingru_gates(const T* __restrict pre, int64_t steps, int64_t hidden, T* __restrict z) {
  for (int64_t t = 0; t < steps; ++t) {
    const T* x = pre + t * 2 * hidden;
    for (int64_t c = 0; c < hidden; ++c) z[t * hidden + c] = activate(x[c], sigmoid_gate<T>());
  }
}

template <typename T>
void mingru_forward_row(const GatedScanForward<T>& a, GatedScanShape shape, int64_t n,
                        std::vector<T>& scratch) {
  const int64_t hidden = shape.hidden;
  std::vector<T> state = initial_state(a, hidden, n);
  T* __restrict h = state.data();
  for_chunks(shape.length, [&](int64_t t0, int64_t steps) {
    const int64_t row = n * shape.length + t0;
    T* z = scratch.data();
    mingru_gates(a.pre + row * 2 * hidden, steps, hidden, z);
    for (int64_t t = 0; t < steps; ++t) {
      const T* __restrict zt = z + t * hidden;
      const T* __restrict candidate = a.pre + (row + t) * 2 * hidden + hidden;
      T* __restrict states = a.states + (row + t) * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        h[c] = mingru_state(zt[c], candidate[c], h[c], a.negative);
        states[c] = h[c];
      }
      if (a.outputs) std::copy(states, states + hidden, a.outputs + (row + t) * hidden);
    }
  });
  if (a.last) std::copy(h, h + hidden, a.last + n * hidden);
}

template <typename T>
void mingru_backward_row(const GatedScanBackward<T>& a, GatedScanShape shape, int64_t n,
                         std::vector<T>& scratch) {
  const int64_t hidden = shape.hidden;
  RowBackward<T> back(a, shape, n);
  T* __restrict carry = back.carry.data();
  for_chunks_in_reverse(shape.length, [&](int64_t t0, int64_t steps) {
    const int64_t row = n * shape.length + t0;
    T* z = scratch.data();
    T* grad_h = scratch.data() + kChunk * hidden;
    mingru_gates(a.pre + row * 2 * hidden, steps, hidden, z);
    for (int64_t t = steps - 1; t >= 0; --t) {
      const T* __restrict zt = z + t * hidden;
      const T* __restrict grad_y = a.grad_outputs + (row + t) * hidden;
      T* __restrict g = grad_h + t * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        g[c] = grad_y[c] + carry[c];
        carry[c] = g[c] * mingru_keep(zt[c], a.negative);
      }
    }
    for (int64_t t = 0; t < steps; ++t) {
      const T* __restrict zt = z + t * hidden;
      const T* __restrict g = grad_h + t * hidden;
      const T* __restrict candidate = a.pre + (row + t) * 2 * hidden + hidden;
      const T* __restrict previous = back.previous(t0 + t);
      T* __restrict grad_pre = a.grad_pre + (row + t) * 2 * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        grad_pre[c] = mingru_grad_pre_z(zt[c], candidate[c], previous[c], g[c], a.negative);
        grad_pre[hidden + c] = g[c] * zt[c];
      }
    }
  });
  back.write_initial_gradient(a, n);
}

template <typename T>
void forward_range(GatedCellKind kind, const GatedScanForward<T>& a, GatedScanShape shape,
                   int64_t begin, int64_t end) {
  std::vector<T> scratch(static_cast<size_t>(kChunk * 4 * shape.hidden));
  if (kind == GatedCellKind::qlstm) {
    const ColumnGates<T> columns = qlstm_columns(a, shape.hidden);
    for (int64_t n = begin; n < end; ++n) qlstm_forward_row(a, shape, columns, n, scratch);
  } else {
    for (int64_t n = begin; n < end; ++n) mingru_forward_row(a, shape, n, scratch);
  }
}

template <typename T>
void backward_range(GatedCellKind kind, const GatedScanBackward<T>& a, GatedScanShape shape,
                    int64_t begin, int64_t end) {
  std::vector<T> scratch(static_cast<size_t>(kChunk * 5 * shape.hidden));
  if (kind == GatedCellKind::qlstm) {
    const GatedScanForward<T> gates_of{a.pre,   a.bias,  nullptr,   nullptr,
                                       nullptr, nullptr, a.negative};
    const ColumnGates<T> columns = qlstm_columns(gates_of, shape.hidden);
    for (int64_t n = begin; n < end; ++n) qlstm_backward_row(a, shape, columns, n, scratch);
  } else {
    for (int64_t n = begin; n < end; ++n) mingru_backward_row(a, shape, n, scratch);
  }
}

}  // namespace

void gated_scan_forward_cpu(GatedCellKind kind, const GatedScanForward<float>& args,
                            GatedScanShape shape, int64_t begin, int64_t end) {
  forward_range(kind, args, shape, begin, end);
}
void gated_scan_forward_cpu(GatedCellKind kind, const GatedScanForward<double>& args,
                            GatedScanShape shape, int64_t begin, int64_t end) {
  forward_range(kind, args, shape, begin, end);
}
void gated_scan_backward_cpu(GatedCellKind kind, const GatedScanBackward<float>& args,
                             GatedScanShape shape, int64_t begin, int64_t end) {
  backward_range(kind, args, shape, begin, end);
}
void gated_scan_backward_cpu(GatedCellKind kind, const GatedScanBackward<double>& args,
                             GatedScanShape shape, int64_t begin, int64_t end) {
  backward_range(kind, args, shape, begin, end);
}

}  // namespace memscript::kernels
