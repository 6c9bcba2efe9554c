#include <algorithm>
#include <vector>

#include "kernels/common/channel_groups.h"
#include "kernels/gated_scan/gated_scan.h"

namespace memscript::kernels {

namespace {

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
void qlstm_forward_group(const GatedScanForward<T>& a, GatedScanShape shape,
                         const ChannelGroup& group) {
  const int64_t lanes = group.lanes(), length = shape.length;
  const std::vector<T> bias = per_lane(a.bias, group);
  std::vector<T> state = group_values(a.initial, group);
  ChunkArrays<T> chunk(6, lanes);
  T *f = chunk[0], *i = chunk[1], *z = chunk[2], *o = chunk[3], *c = chunk[4], *y = chunk[5];
  const int64_t ahead = chunk_ahead(length, false);
  for_chunks(shape.length, [&](int64_t t0, int64_t steps) {
    gather_chunk_slots<4>(a.pre, length, group, t0, steps, {f, i, z, o}, ahead);
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
    scatter_chunk(c, length, group, t0, steps, a.states, ahead);
    scatter_chunk(y, length, group, t0, steps, a.outputs, ahead);
  });
  store_group_values(state, group, a.last);
}

template <typename T>
void qlstm_backward_group(const GatedScanBackward<T>& a, GatedScanShape shape,
                          const ChannelGroup& group) {
  const int64_t lanes = group.lanes(), length = shape.length;
  const std::vector<T> bias = per_lane(a.bias, group);
  const std::vector<T> initial = group_values(a.initial, group);
  std::vector<T> carry = group_values(a.grad_last, group);
  ChunkArrays<T> chunk(8, lanes);
  ChunkStates<T> states(lanes);
  T *f = chunk[0], *i = chunk[1], *z = chunk[2], *o = chunk[3], *gy = chunk[4],
    *previous = chunk[5], *gc = chunk[6], *go = chunk[7];
  const int64_t ahead = chunk_ahead(length, true);
  for_chunks_in_reverse(shape.length, [&](int64_t t0, int64_t steps) {
    gather_chunk_slots<4>(a.pre, length, group, t0, steps, {f, i, z, o}, ahead);
    qlstm_gates(f, i, z, o, bias.data(), steps, lanes, a.negative);
    states.gather(a.states, length, group, t0, steps, ahead);
    const T* c = states.states();
    previous_states(c, initial, t0, steps, lanes, previous);
    gather_chunk(a.grad_outputs, length, group, t0, steps, gy, ahead);
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
    scatter_chunk_slots<4>({f, i, z, go}, length, group, t0, steps, a.grad_pre, ahead);
  });
  store_group_values(carry, group, a.grad_initial);
}

template <typename T>
void mingru_forward_group(const GatedScanForward<T>& a, GatedScanShape shape,
                          const ChannelGroup& group) {
  const int64_t lanes = group.lanes(), length = shape.length;
  std::vector<T> state = group_values(a.initial, group);
  ChunkArrays<T> chunk(3, lanes);
  T *z = chunk[0], *candidate = chunk[1], *h = chunk[2];
  const int64_t ahead = chunk_ahead(length, false);
  for_chunks(shape.length, [&](int64_t t0, int64_t steps) {
    gather_chunk_slots<2>(a.pre, length, group, t0, steps, {z, candidate}, ahead);
    for (int64_t j = 0; j < steps * lanes; ++j) z[j] = activate(z[j], sigmoid_gate<T>());
    T* __restrict s = state.data();
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t at = t * lanes;
      for (int64_t l = 0; l < lanes; ++l) {
        s[l] = mingru_state(z[at + l], candidate[at + l], s[l], a.negative);
        h[at + l] = s[l];
      }
    }
    scatter_chunk(h, length, group, t0, steps, a.states, ahead);
    if (a.outputs) scatter_chunk(h, length, group, t0, steps, a.outputs, ahead);
  });
  store_group_values(state, group, a.last);
}

template <typename T>
void mingru_backward_group(const GatedScanBackward<T>& a, GatedScanShape shape,
                           const ChannelGroup& group) {
  const int64_t lanes = group.lanes(), length = shape.length;
  const std::vector<T> initial = group_values(a.initial, group);
  std::vector<T> carry = group_values(a.grad_last, group);
  ChunkArrays<T> chunk(4, lanes);
  ChunkStates<T> states(lanes);
  T *z = chunk[0], *candidate = chunk[1], *gh = chunk[2], *previous = chunk[3];
  const int64_t ahead = chunk_ahead(length, true);
  for_chunks_in_reverse(shape.length, [&](int64_t t0, int64_t steps) {
    gather_chunk_slots<2>(a.pre, length, group, t0, steps, {z, candidate}, ahead);
    for (int64_t j = 0; j < steps * lanes; ++j) z[j] = activate(z[j], sigmoid_gate<T>());
    states.gather(a.states, length, group, t0, steps, ahead);
    const T* h = states.states();
    previous_states(h, initial, t0, steps, lanes, previous);
    gather_chunk(a.grad_outputs, length, group, t0, steps, gh, ahead);
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
    scatter_chunk_slots<2>({z, candidate}, length, group, t0, steps, a.grad_pre, ahead);
  });
  store_group_values(carry, group, a.grad_initial);
}

template <typename T>
void forward_range(GatedCellKind kind, const GatedScanForward<T>& a, GatedScanShape shape,
                   int64_t begin, int64_t end) {
  for_channel_groups(shape.hidden, begin, end, [&](const ChannelGroup& group) {
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
  for_channel_groups(shape.hidden, begin, end, [&](const ChannelGroup& group) {
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
