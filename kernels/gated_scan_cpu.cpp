#include <algorithm>
#include <vector>

#include "gated_scan.h"

namespace memscript::kernels {

namespace {

// Steps per chunk: a chunk's arrays stay in the L1 cache between the passes over it.
constexpr int64_t kChunk = 32;
// Channels stepped together. At the study's sizes a batch row has 4 channels, and a recurrence
// over 4 numbers per step is one dependent multiply-add after another; the channels of several
// batch rows side by side make each step a few whole vector operations instead.
constexpr int64_t kGroupLanes = 32;

// Batch rows [first, first + rows) stepped together: lane g · hidden + c is channel c of row
// first + g. Every lane computes exactly what the CUDA body computes for its channel, in the same
// order, so results do not depend on the grouping.
struct Group {
  int64_t first;
  int64_t rows;
  int64_t hidden;

  int64_t lanes() const { return rows * hidden; }
};

// std::copy of `count` numbers, inlined for the small counts of a batch row's channels (a
// library memmove call for 4 numbers cost more than the scan's arithmetic).
template <typename T>
void copy_channels(const T* from, int64_t count, T* to) {
  const auto fixed = [&]<int64_t N>() { std::copy(from, from + N, to); };
  switch (count) {
    case 1:
      return fixed.template operator()<1>();
    case 2:
      return fixed.template operator()<2>();
    case 4:
      return fixed.template operator()<4>();
    case 8:
      return fixed.template operator()<8>();
    case 16:
      return fixed.template operator()<16>();
    default:
      std::copy(from, from + count, to);
  }
}

// The chunk's steps of one hidden-wide slice of a [batch, length, width] array (the slice at
// column `offset` of each step), into lanes: out[t · lanes + g · hidden + c].
template <typename T>
void gather(const T* source, int64_t width, int64_t offset, GatedScanShape shape, Group group,
            int64_t t0, int64_t steps, T* out) {
  for (int64_t g = 0; g < group.rows; ++g) {
    const T* row = source + ((group.first + g) * shape.length + t0) * width + offset;
    for (int64_t t = 0; t < steps; ++t) {
      copy_channels(row + t * width, group.hidden, out + t * group.lanes() + g * group.hidden);
    }
  }
}

// The inverse of gather.
template <typename T>
void scatter(const T* lanes, GatedScanShape shape, Group group, int64_t t0, int64_t steps,
             T* target, int64_t width, int64_t offset) {
  for (int64_t g = 0; g < group.rows; ++g) {
    T* row = target + ((group.first + g) * shape.length + t0) * width + offset;
    for (int64_t t = 0; t < steps; ++t) {
      copy_channels(lanes + t * group.lanes() + g * group.hidden, group.hidden, row + t * width);
    }
  }
}

// One per-lane value of a [batch, hidden] array (initial state, gradient of the last state), or
// zeros when it is null; and back.
template <typename T>
std::vector<T> lanes_of(const T* per_row, Group group) {
  std::vector<T> values(static_cast<size_t>(group.lanes()), T(0));
  if (per_row) {
    const T* from = per_row + group.first * group.hidden;
    std::copy(from, from + group.lanes(), values.begin());
  }
  return values;
}
template <typename T>
void store_lanes(const std::vector<T>& values, Group group, T* per_row) {
  if (per_row) std::copy(values.begin(), values.end(), per_row + group.first * group.hidden);
}

// Each lane's forget bias (qLSTM), for forget_gate().
template <typename T>
std::vector<T> lane_biases(const T* bias, Group group) {
  std::vector<T> values(static_cast<size_t>(group.lanes()), T(0));
  if (bias) {
    for (int64_t l = 0; l < group.lanes(); ++l) values[l] = bias[l % group.hidden];
  }
  return values;
}

// Calls body(t0, steps) for the chunks of the sequence, first to last or last to first.
template <typename F>
void for_chunks(int64_t length, F&& body) {
  for (int64_t t0 = 0; t0 < length; t0 += kChunk) body(t0, std::min(kChunk, length - t0));
}
template <typename F>
void for_chunks_in_reverse(int64_t length, F&& body) {
  if (length == 0) return;
  for (int64_t t0 = (length - 1) / kChunk * kChunk; t0 >= 0; t0 -= kChunk)
    body(t0, std::min(kChunk, length - t0));
}

// Scratch for one chunk: `arrays` arrays of [kChunk][lanes].
template <typename T>
struct ChunkArrays {
  std::vector<T> storage;
  int64_t lanes;

  ChunkArrays(int arrays, int64_t lanes_)
      : storage(static_cast<size_t>(arrays * kChunk * lanes_)), lanes(lanes_) {}
  T* operator[](int index) { return storage.data() + index * kChunk * lanes; }
};

// The four gates of a chunk's steps from their pre-activations, in place: f, i, z, o.
template <typename T>
void qlstm_gates(T* __restrict f, T* __restrict i, T* __restrict z, T* __restrict o,
                 const T* __restrict bias, int64_t steps, int64_t lanes, bool negative) {
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t at = t * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      f[at + l] = activate(f[at + l], forget_gate<T>(bias[l], negative));
      i[at + l] = activate(i[at + l], sigmoid_gate<T>());
      z[at + l] = activate(z[at + l], tanh_gate<T>());
      o[at + l] = activate(o[at + l], sigmoid_gate<T>());
    }
  }
}

template <typename T>
void qlstm_forward_group(const GatedScanForward<T>& a, GatedScanShape shape, Group group) {
  const int64_t lanes = group.lanes(), hidden = shape.hidden, width = 4 * hidden;
  const std::vector<T> bias = lane_biases(a.bias, group);
  std::vector<T> state = lanes_of(a.initial, group);
  ChunkArrays<T> chunk(6, lanes);
  T *f = chunk[0], *i = chunk[1], *z = chunk[2], *o = chunk[3], *c = chunk[4], *y = chunk[5];
  for_chunks(shape.length, [&](int64_t t0, int64_t steps) {
    for (int slot = 0; slot < 4; ++slot)
      gather(a.pre, width, slot * hidden, shape, group, t0, steps, chunk[slot]);
    qlstm_gates(f, i, z, o, bias.data(), steps, lanes, a.negative);
    T* __restrict h = state.data();
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t at = t * lanes;
      for (int64_t l = 0; l < lanes; ++l) {
        h[l] = qlstm_state(f[at + l], i[at + l], z[at + l], h[l]);
        c[at + l] = h[l];
      }
    }
    for (int64_t j = 0; j < steps * lanes; ++j) y[j] = qlstm_output(o[j], c[j]);
    scatter(c, shape, group, t0, steps, a.states, hidden, 0);
    scatter(y, shape, group, t0, steps, a.outputs, hidden, 0);
  });
  store_lanes(state, group, a.last);
}

// The states before each of a chunk's steps: the previous step's, the initial state, or zero.
template <typename T>
void previous_states(const T* states, const std::vector<T>& initial, int64_t t0, int64_t steps,
                     int64_t lanes, T* previous) {
  if (t0 > 0) {
    std::copy(states - lanes, states + (steps - 1) * lanes, previous);
  } else {
    std::copy(initial.begin(), initial.end(), previous);
    std::copy(states, states + (steps - 1) * lanes, previous + lanes);
  }
}

template <typename T>
void qlstm_backward_group(const GatedScanBackward<T>& a, GatedScanShape shape, Group group) {
  const int64_t lanes = group.lanes(), hidden = shape.hidden, width = 4 * hidden;
  const std::vector<T> bias = lane_biases(a.bias, group);
  const std::vector<T> initial = lanes_of(a.initial, group);
  std::vector<T> carry = lanes_of(a.grad_last, group);
  ChunkArrays<T> chunk(8, lanes);
  // One step more of states than the chunk, for the state before its first step.
  std::vector<T> states(static_cast<size_t>((kChunk + 1) * lanes));
  T *f = chunk[0], *i = chunk[1], *z = chunk[2], *o = chunk[3], *gy = chunk[4],
    *previous = chunk[5], *gc = chunk[6], *go = chunk[7];
  for_chunks_in_reverse(shape.length, [&](int64_t t0, int64_t steps) {
    for (int slot = 0; slot < 4; ++slot)
      gather(a.pre, width, slot * hidden, shape, group, t0, steps, chunk[slot]);
    qlstm_gates(f, i, z, o, bias.data(), steps, lanes, a.negative);
    T* c = states.data() + lanes;  // c[-lanes …) is the step before t0
    if (t0 > 0) {
      gather(a.states, hidden, 0, shape, group, t0 - 1, steps + 1, states.data());
    } else {
      gather(a.states, hidden, 0, shape, group, t0, steps, c);
    }
    previous_states(c, initial, t0, steps, lanes, previous);
    gather(a.grad_outputs, hidden, 0, shape, group, t0, steps, gy);
    // What the outputs hand back, to c_t and to o.
    for (int64_t j = 0; j < steps * lanes; ++j) {
      const QlstmOutputGrads<T> out = qlstm_output_grads(o[j], c[j], gy[j]);
      gc[j] = out.state;
      go[j] = out.pre_o;
    }
    // The carry through the forget gates, step by step in reverse.
    T* __restrict k = carry.data();
    for (int64_t t = steps - 1; t >= 0; --t) {
      const int64_t at = t * lanes;
      for (int64_t l = 0; l < lanes; ++l) {
        gc[at + l] = gc[at + l] + k[l];
        k[l] = gc[at + l] * f[at + l];
      }
    }
    // The gates' gradients, written over their values (f, i, z in place; o's is go).
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t j = t * lanes + l;
        const T fj = f[j], ij = i[j], zj = z[j];
        f[j] = gc[j] * previous[j] * activation_slope(fj, forget_gate<T>(bias[l], a.negative));
        i[j] = gc[j] * zj * activation_slope(ij, sigmoid_gate<T>());
        z[j] = gc[j] * ij * activation_slope(zj, tanh_gate<T>());
      }
    }
    scatter(f, shape, group, t0, steps, a.grad_pre, width, 0);
    scatter(i, shape, group, t0, steps, a.grad_pre, width, hidden);
    scatter(z, shape, group, t0, steps, a.grad_pre, width, 2 * hidden);
    scatter(go, shape, group, t0, steps, a.grad_pre, width, 3 * hidden);
  });
  store_lanes(carry, group, a.grad_initial);
}

template <typename T>
void mingru_forward_group(const GatedScanForward<T>& a, GatedScanShape shape, Group group) {
  const int64_t lanes = group.lanes(), hidden = shape.hidden, width = 2 * hidden;
  std::vector<T> state = lanes_of(a.initial, group);
  ChunkArrays<T> chunk(3, lanes);
  T *z = chunk[0], *candidate = chunk[1], *h = chunk[2];
  for_chunks(shape.length, [&](int64_t t0, int64_t steps) {
    gather(a.pre, width, 0, shape, group, t0, steps, z);
    gather(a.pre, width, hidden, shape, group, t0, steps, candidate);
    for (int64_t j = 0; j < steps * lanes; ++j) z[j] = activate(z[j], sigmoid_gate<T>());
    T* __restrict s = state.data();
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t at = t * lanes;
      for (int64_t l = 0; l < lanes; ++l) {
        s[l] = mingru_state(z[at + l], candidate[at + l], s[l], a.negative);
        h[at + l] = s[l];
      }
    }
    scatter(h, shape, group, t0, steps, a.states, hidden, 0);
    if (a.outputs) scatter(h, shape, group, t0, steps, a.outputs, hidden, 0);
  });
  store_lanes(state, group, a.last);
}

template <typename T>
void mingru_backward_group(const GatedScanBackward<T>& a, GatedScanShape shape, Group group) {
  const int64_t lanes = group.lanes(), hidden = shape.hidden, width = 2 * hidden;
  const std::vector<T> initial = lanes_of(a.initial, group);
  std::vector<T> carry = lanes_of(a.grad_last, group);
  ChunkArrays<T> chunk(5, lanes);
  std::vector<T> states(static_cast<size_t>((kChunk + 1) * lanes));
  T *z = chunk[0], *candidate = chunk[1], *gh = chunk[2], *previous = chunk[3];
  for_chunks_in_reverse(shape.length, [&](int64_t t0, int64_t steps) {
    gather(a.pre, width, 0, shape, group, t0, steps, z);
    gather(a.pre, width, hidden, shape, group, t0, steps, candidate);
    for (int64_t j = 0; j < steps * lanes; ++j) z[j] = activate(z[j], sigmoid_gate<T>());
    T* h = states.data() + lanes;
    if (t0 > 0) {
      gather(a.states, hidden, 0, shape, group, t0 - 1, steps + 1, states.data());
    } else {
      gather(a.states, hidden, 0, shape, group, t0, steps, h);
    }
    previous_states(h, initial, t0, steps, lanes, previous);
    gather(a.grad_outputs, hidden, 0, shape, group, t0, steps, gh);
    T* __restrict k = carry.data();
    for (int64_t t = steps - 1; t >= 0; --t) {
      const int64_t at = t * lanes;
      for (int64_t l = 0; l < lanes; ++l) {
        gh[at + l] = gh[at + l] + k[l];
        k[l] = gh[at + l] * mingru_keep(z[at + l], a.negative);
      }
    }
    // z's gradient over z; the candidate's over the candidate.
    for (int64_t j = 0; j < steps * lanes; ++j) {
      const T zj = z[j];
      z[j] = mingru_grad_pre_z(zj, candidate[j], previous[j], gh[j], a.negative);
      candidate[j] = gh[j] * zj;
    }
    scatter(z, shape, group, t0, steps, a.grad_pre, width, 0);
    scatter(candidate, shape, group, t0, steps, a.grad_pre, width, hidden);
  });
  store_lanes(carry, group, a.grad_initial);
}

// Calls body(group) for groups of batch rows [begin, end) with about kGroupLanes lanes each.
template <typename F>
void for_groups(GatedScanShape shape, int64_t begin, int64_t end, F&& body) {
  const int64_t rows = std::max<int64_t>(1, kGroupLanes / shape.hidden);
  for (int64_t n = begin; n < end; n += rows) body(Group{n, std::min(rows, end - n), shape.hidden});
}

template <typename T>
void forward_range(GatedCellKind kind, const GatedScanForward<T>& a, GatedScanShape shape,
                   int64_t begin, int64_t end) {
  for_groups(shape, begin, end, [&](Group group) {
    if (kind == GatedCellKind::qlstm) {
      qlstm_forward_group(a, shape, group);
    } else {
      mingru_forward_group(a, shape, group);
    }
  });
}

template <typename T>
void backward_range(GatedCellKind kind, const GatedScanBackward<T>& a, GatedScanShape shape,
                    int64_t begin, int64_t end) {
  for_groups(shape, begin, end, [&](Group group) {
    if (kind == GatedCellKind::qlstm) {
      qlstm_backward_group(a, shape, group);
    } else {
      mingru_backward_group(a, shape, group);
    }
  });
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
