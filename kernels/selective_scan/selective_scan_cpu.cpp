#include <algorithm>
#include <vector>

#include "kernels/common/row_tile.h"
#include "kernels/selective_scan/selective_scan.h"

namespace memscript::kernels {

namespace {

// Sixteen channels of one batch row step together, one per vector lane: their Δ, u and y are
// contiguous at every step, and B and C are the same for all of them. Each lane evaluates the
// per-thread bodies' expressions (selective_scan.h) in the same order, and the per-group partial
// sums of grad_B and grad_C add the lanes in channel order, so the results are the same bits as
// one channel at a time (and as the CUDA kernels).

// Channels [first, first + count) of batch row n (common/row_tile.h's LaneGroup).
struct ChannelBlock : LaneGroup {
  int64_t n;
};

// Per lane, the start of its channel's `width` numbers in a [.., channels, width] array whose
// block starts at `base` (rows of the block's channels, one after another).
template <typename T>
LaneRows<T> channel_rows(T* base, int64_t width, const ChannelBlock& b) {
  return lane_rows(base, width, LaneGroup{0, b.count});
}

// column[k][l] = A[first + l, k].
template <typename T>
void load_A(const T* A, const SelectiveScanShape& s, const ChannelBlock& b, Lanes<T>* columns) {
  gather_lane_rows(channel_rows(A + b.first * s.states, s.states, b).rows, s.states, columns);
}

// One step's update of every lane's state (selective_step without the output), exp(Δ·A) kept
// in `exps` when given.
template <typename T>
void step_states(Lanes<T>* h, Lanes<T> delta, Lanes<T> delta_u, const Lanes<T>* A, const T* B,
                 Lanes<T>* exps, int64_t states, Transition<T> a) {
  for (int64_t k = 0; k < states; ++k) {
    const Lanes<T> e = exp_lanes(delta * A[k]);
    if (exps) exps[k] = e;
    h[k] = (a.scale * e - a.shift) * h[k] + delta_u * B[k];
  }
}

template <typename T>
void forward_block(const SelectiveScanForward<T, T>& f, const SelectiveScanShape& s,
                   const ChannelBlock& b) {
  const int64_t states = s.states;
  const Transition<T> a(f.negative_eigenvalues);
  TileScratch<T> columns(2 * states);
  Lanes<T>* A = columns.data();
  Lanes<T>* h = A + states;
  load_A(f.A, s, b, A);
  const int64_t state_at = (b.n * s.channels + b.first) * states;
  if (f.h0) gather_lane_rows(channel_rows(f.h0 + state_at, states, b).rows, states, h);
  for (int64_t t = 0; t < s.length; ++t) {
    if (f.checkpoints && t % s.segment == 0) {
      T* saved =
          f.checkpoints + ((b.n * s.segments() + t / s.segment) * s.channels + b.first) * states;
      scatter_lane_rows(h, states, b.count, channel_rows(saved, states, b).rows);
    }
    const int64_t i = (b.n * s.length + t) * s.channels + b.first;
    const T* B = f.B + (b.n * s.length + t) * states;
    const T* C = f.C + (b.n * s.length + t) * states;
    const Lanes<T> delta = load_lanes(f.delta + i, b.count);
    step_states<T>(h, delta, delta * load_lanes(f.u + i, b.count), A, B, nullptr, states, a);
    Lanes<T> y{};
    for (int64_t k = 0; k < states; ++k) y += C[k] * h[k];
    store_lanes(y, b.count, f.y + i);
  }
  scatter_lane_rows(h, states, b.count, channel_rows(f.h_last + state_at, states, b).rows);
}

// selective_scan_backward_group for a group that fits in one block of lanes.
template <typename T>
void backward_group(const SelectiveScanBackward<T, T>& g, const SelectiveScanShape& s,
                    const ChannelBlock& b) {
  const int64_t states = s.states, segment = s.segment;
  const Transition<T> a(g.negative_eigenvalues);
  // A, the carry, grad_A, one step's terms of grad_C and grad_B, then a segment's states (one
  // more than its steps) and exps.
  TileScratch<T> columns((5 + 2 * segment + 1) * states);
  Lanes<T>* A = columns.data();
  Lanes<T>* carry = A + states;
  Lanes<T>* grad_A = carry + states;
  Lanes<T>* terms_C = grad_A + states;
  Lanes<T>* terms_B = terms_C + states;
  Lanes<T>* seg_states = terms_B + states;
  Lanes<T>* exps = seg_states + (segment + 1) * states;
  load_A(g.A, s, b, A);
  const int64_t state_at = (b.n * s.channels + b.first) * states;
  if (g.grad_h_last)
    gather_lane_rows(channel_rows(g.grad_h_last + state_at, states, b).rows, states, carry);
  const int64_t group_row = b.n * s.groups() + b.first / s.group;
  T* grad_B = g.grad_B + group_row * s.length * states;
  T* grad_C = g.grad_C + group_row * s.length * states;
  std::fill(grad_B, grad_B + s.length * states, T(0));
  std::fill(grad_C, grad_C + s.length * states, T(0));
  for (int64_t seg = s.segments() - 1; seg >= 0; --seg) {
    const int64_t begin = seg * segment, end = std::min(begin + segment, s.length);
    const T* saved = g.checkpoints + ((b.n * s.segments() + seg) * s.channels + b.first) * states;
    gather_lane_rows(channel_rows(saved, states, b).rows, states, seg_states);
    for (int64_t t = begin; t < end; ++t) {
      Lanes<T>* h = seg_states + (t - begin + 1) * states;
      for (int64_t k = 0; k < states; ++k) h[k] = h[k - states];
      const int64_t i = (b.n * s.length + t) * s.channels + b.first;
      const Lanes<T> delta = load_lanes(g.delta + i, b.count);
      step_states<T>(h, delta, delta * load_lanes(g.u + i, b.count), A,
                     g.B + (b.n * s.length + t) * states, exps + (t - begin) * states, states, a);
    }
    for (int64_t t = end - 1; t >= begin; --t) {
      const int64_t i = (b.n * s.length + t) * s.channels + b.first;
      const int64_t row = (b.n * s.length + t) * states;
      const Lanes<T> delta = load_lanes(g.delta + i, b.count);
      const Lanes<T> u = load_lanes(g.u + i, b.count);
      const Lanes<T> grad_y = load_lanes(g.grad_y + i, b.count);
      const Lanes<T>* h = seg_states + (t - begin + 1) * states;
      const Lanes<T>* previous = h - states;
      const Lanes<T>* e = exps + (t - begin) * states;
      const T* B = g.B + row;
      const T* C = g.C + row;
      Lanes<T> grad_delta{}, grad_u{};
      for (int64_t k = 0; k < states; ++k) {
        const Lanes<T> grad_h = carry[k] + grad_y * C[k];
        const Lanes<T> grad_x = grad_h * previous[k] * (a.scale * e[k]);
        terms_C[k] = grad_y * h[k];
        terms_B[k] = grad_h * delta * u;
        grad_A[k] += grad_x * delta;
        grad_delta += grad_x * A[k] + grad_h * u * B[k];
        grad_u += grad_h * delta * B[k];
        carry[k] = (a.scale * e[k] - a.shift) * grad_h;
      }
      // The group's partial sums, lanes added in channel order.
      add_lanes_in_order(terms_C, states, b.count, grad_C + t * states);
      add_lanes_in_order(terms_B, states, b.count, grad_B + t * states);
      store_lanes(grad_u, b.count, g.grad_u + i);
      store_lanes(grad_delta, b.count, g.grad_delta + i);
    }
  }
  scatter_lane_rows(grad_A, states, b.count, channel_rows(g.grad_A + state_at, states, b).rows);
  if (g.grad_h0)
    scatter_lane_rows(carry, states, b.count, channel_rows(g.grad_h0 + state_at, states, b).rows);
}

template <typename T>
void forward_range(const SelectiveScanForward<T, T>& f, const SelectiveScanShape& s, int64_t begin,
                   int64_t end) {
  // Blocks of up to kTileRows channels within one batch row.
  for (int64_t index = begin; index < end;) {
    const int64_t n = index / s.channels, d = index % s.channels;
    const int64_t count = std::min({kTileRows, s.channels - d, end - index});
    forward_block(f, s, ChannelBlock{{d, count}, n});
    index += count;
  }
}

template <typename T>
void backward_range(const SelectiveScanBackward<T, T>& g, const SelectiveScanShape& s,
                    int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; ++item) {
    if (s.group > kTileRows) {
      selective_scan_backward_group<T, T>(g, s, item);
      continue;
    }
    const int64_t n = item / s.groups(), first = (item % s.groups()) * s.group;
    backward_group(g, s, ChannelBlock{{first, std::min(s.group, s.channels - first)}, n});
  }
}

}  // namespace

void selective_scan_forward_cpu(const SelectiveScanForward<float, float>& f, SelectiveScanShape s,
                                int64_t begin, int64_t end) {
  forward_range(f, s, begin, end);
}

void selective_scan_forward_cpu(const SelectiveScanForward<double, double>& f, SelectiveScanShape s,
                                int64_t begin, int64_t end) {
  forward_range(f, s, begin, end);
}

void selective_scan_backward_cpu(const SelectiveScanBackward<float, float>& g, SelectiveScanShape s,
                                 int64_t begin, int64_t end) {
  backward_range(g, s, begin, end);
}

void selective_scan_backward_cpu(const SelectiveScanBackward<double, double>& g,
                                 SelectiveScanShape s, int64_t begin, int64_t end) {
  backward_range(g, s, begin, end);
}

}  // namespace memscript::kernels
