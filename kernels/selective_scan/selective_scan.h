#pragma once

// Mamba's selective scan, fused: for every batch row n and channel d, a state h of d_state
// numbers walks the sequence,
//   h_t[k] = a(Δ_t A[d, k]) · h_{t-1}[k] + Δ_t u_t B_t[k],   y_t = Σ_k C_t[k] h_t[k]
// with a(x) = exp(x), or 2·exp(x) − 1 with negative eigenvalues. Shapes (contiguous):
//   u, Δ, y [batch, length, channels];  A [channels, states];  B, C [batch, length, states];
//   h0, h_last [batch, channels, states].
// The state lives only in h_last, updated in place, so the forward needs O(batch · channels ·
// states) memory whatever the length: [batch, length, channels, states] is never formed.
//
// The backward walks the sequence in reverse and needs h_{t-1} at each step. Storing every
// state would be exactly the [B, L, D, N] tensor the forward avoids, and running the recurrence
// backwards (dividing by a) is unstable where a is near 0. So the forward (when gradients are
// wanted) saves the state every `segment` steps, and the backward recomputes one segment's
// states from its checkpoint into a [segment, states] scratch, then walks that segment back:
// one extra forward in time, L / segment + segment states in memory (segment ≈ sqrt(L)).
//
// Gradients for B and C are sums over channels, and the one for A a sum over the batch. To keep
// results independent of how the work is split, the backward's unit of work is a fixed group of
// `group` channels of one batch row (processed in order), writing its own partial sums:
//   grad_B, grad_C partials [batch, groups, length, states], grad_A partial [batch, channels,
//   states]; the caller sums them over groups / batch.

#include <cstdint>

#include "kernels/common/cuda_device.h"
#include "kernels/common/fast_exp.h"
#include "kernels/common/host_device.h"

namespace memscript::kernels {

struct SelectiveScanShape {
  int64_t batch;
  int64_t length;
  int64_t channels;  // d_inner
  int64_t states;    // d_state
  int64_t segment;   // steps between checkpoints (>= 1)
  int64_t group;     // channels per backward work item (>= 1)

  MS_HOST_DEVICE int64_t segments() const { return (length + segment - 1) / segment; }
  MS_HOST_DEVICE int64_t groups() const { return (channels + group - 1) / group; }
};

// Acc is the state's type (float32 for bf16 inputs on the GPU).
template <typename T, typename Acc>
struct SelectiveScanForward {
  const T* u;
  const T* delta;
  const T* A;
  const T* B;
  const T* C;
  const Acc* h0;  // or null: zero state
  T* y;
  Acc* h_last;       // the running state, required
  Acc* checkpoints;  // [batch, segments, channels, states], or null (no backward to come)
  bool negative_eigenvalues;
};

template <typename T, typename Acc>
struct SelectiveScanBackward {
  const T* u;
  const T* delta;
  const T* A;
  const T* B;
  const T* C;
  const Acc* checkpoints;  // from the forward
  const T* grad_y;
  const Acc* grad_h_last;  // or null
  T* grad_u;
  T* grad_delta;
  Acc* grad_A;   // [batch, channels, states] partials
  Acc* grad_B;   // [batch, groups, length, states] partials
  Acc* grad_C;   // same
  Acc* grad_h0;  // [batch, channels, states], or null
  Acc* scratch;  // [batch · groups, segment_scratch_size]
  bool negative_eigenvalues;
};

// The transition a at x = Δ·A and its slope da/dx, from e = exp(x): a = e, da/dx = e, or with
// negative eigenvalues a = 2e − 1, da/dx = 2e. Written as scale·e − shift and scale·e with
// (scale, shift) = (1, 0) or (2, 1), which gives the same numbers (1·e and e − 0 are e) without
// a branch inside the loops over states: GCC does not vectorize a loop with one. Only e is kept
// between the passes.
template <typename Acc>
struct Transition {
  Acc scale;
  Acc shift;

  MS_HOST_DEVICE explicit Transition(bool negative_eigenvalues)
      : scale(negative_eigenvalues ? Acc(2) : Acc(1)),
        shift(negative_eigenvalues ? Acc(1) : Acc(0)) {}
  MS_HOST_DEVICE Acc of(Acc e) const { return scale * e - shift; }
  MS_HOST_DEVICE Acc slope(Acc e) const { return scale * e; }
};

// h[k] ← a(Δ·A[k])·h[k] + Δu·B[k] for every state k; returns exp(Δ·A[k]) through `exps`
// when KeepExps (the backward's recomputation), so that the store is no branch in the loop.
template <bool KeepExps, typename T, typename Acc>
MS_HOST_DEVICE inline void update_states(Acc* __restrict__ state, Acc delta, Acc delta_u,
                                         const T* __restrict__ A_row, const T* __restrict__ B_row,
                                         Acc* __restrict__ exps, int64_t states,
                                         Transition<Acc> a) {
  for (int64_t k = 0; k < states; ++k) {
    const Acc e = exp_of(delta * static_cast<Acc>(A_row[k]));
    if constexpr (KeepExps) exps[k] = e;
    state[k] = a.of(e) * state[k] + delta_u * static_cast<Acc>(B_row[k]);
  }
}

// One step of one channel's state; returns y_t = Σ_k C_t[k] h_t[k] (C may be null: no output).
// `exps`, when given, receives exp(Δ·A[k]) for the backward. The update and the sum are two
// loops so that the first (with its exp) vectorizes without reordering the sum.
template <typename T, typename Acc>
MS_HOST_DEVICE inline Acc selective_step(Acc* state, Acc delta, Acc delta_u, const T* A_row,
                                         const T* B_row, const T* C_row, Acc* exps, int64_t states,
                                         bool negative_eigenvalues) {
  const Transition<Acc> a(negative_eigenvalues);
  if (exps) {
    update_states<true, T, Acc>(state, delta, delta_u, A_row, B_row, exps, states, a);
  } else {
    update_states<false, T, Acc>(state, delta, delta_u, A_row, B_row, exps, states, a);
  }
  Acc y = Acc(0);
  if (C_row) {
    for (int64_t k = 0; k < states; ++k) y += static_cast<Acc>(C_row[k]) * state[k];
  }
  return y;
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void selective_scan_channel(const SelectiveScanForward<T, Acc>& f,
                                                  SelectiveScanShape s, int64_t channel_index) {
  const int64_t n = channel_index / s.channels;
  const int64_t d = channel_index % s.channels;
  Acc* state = f.h_last + channel_index * s.states;
  for (int64_t k = 0; k < s.states; ++k)
    state[k] = f.h0 ? f.h0[channel_index * s.states + k] : Acc(0);
  for (int64_t t = 0; t < s.length; ++t) {
    if (f.checkpoints && t % s.segment == 0) {
      Acc* saved = f.checkpoints + ((n * s.segments() + t / s.segment) * s.channels + d) * s.states;
      for (int64_t k = 0; k < s.states; ++k) saved[k] = state[k];
    }
    const int64_t i = (n * s.length + t) * s.channels + d;
    const int64_t row = (n * s.length + t) * s.states;
    const Acc delta = static_cast<Acc>(f.delta[i]);
    const Acc y = selective_step<T, Acc>(
        state, delta, delta * static_cast<Acc>(f.u[i]), f.A + d * s.states, f.B + row, f.C + row,
        static_cast<Acc*>(nullptr), s.states, f.negative_eigenvalues);
    f.y[i] = static_cast<T>(y);
  }
}

// One work item's scratch: the states h_{begin-1} .. h_{end-1} of the segment being walked
// back (recomputed from its checkpoint), exp(Δ·A) at each of its steps, and the gradient
// reaching the current state from later steps.
template <typename Acc>
struct SegmentScratch {
  Acc* states;  // [segment + 1, states]
  Acc* exps;    // [segment, states]
  Acc* carry;   // [states]
};

// Scratch numbers one backward work item needs.
MS_HOST_DEVICE inline int64_t segment_scratch_size(const SelectiveScanShape& s) {
  return (2 * s.segment + 2) * s.states;
}

// States per block of the backward's per-state pass (one AVX vector of floats).
constexpr int64_t kStateBlock = 8;

// One step's per-state terms for `count` states (pointers already at the block's first state):
// the partial sums of grad_C, grad_B and grad_A, the carry into the previous step, and what
// each state adds to grad_Δ (delta_terms) and grad_u (u_terms). Each state's arithmetic stands
// alone, so the loop has no sum across states.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void selective_state_grads(
    const SelectiveScanBackward<T, Acc>& g, const T* __restrict__ A_row, int64_t row,
    int64_t partial_row, Acc* __restrict__ grad_A, const Acc* __restrict__ h,
    const Acc* __restrict__ previous, const Acc* __restrict__ exps, Acc* __restrict__ carry,
    Acc delta, Acc u, Acc grad_y, int64_t count, Acc* __restrict__ delta_terms,
    Acc* __restrict__ u_terms) {
  const T* __restrict__ B = g.B + row;
  const T* __restrict__ C = g.C + row;
  Acc* __restrict__ grad_B = g.grad_B + partial_row;
  Acc* __restrict__ grad_C = g.grad_C + partial_row;
  const Transition<Acc> a(g.negative_eigenvalues);
  for (int64_t k = 0; k < count; ++k) {
    const Acc A_k = static_cast<Acc>(A_row[k]);
    const Acc B_k = static_cast<Acc>(B[k]);
    const Acc grad_h = carry[k] + grad_y * static_cast<Acc>(C[k]);
    // through a, at x = Δ·A
    const Acc grad_x = grad_h * previous[k] * a.slope(exps[k]);
    grad_C[k] += grad_y * h[k];
    grad_B[k] += grad_h * delta * u;
    grad_A[k] += grad_x * delta;
    delta_terms[k] = grad_x * A_k + grad_h * u * B_k;
    u_terms[k] = grad_h * delta * B_k;
    carry[k] = a.of(exps[k]) * grad_h;
  }
}

// Channel d of batch row n, steps [begin, end) of one segment, in reverse; partial sums go to
// the group's rows.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void selective_segment_backward(const SelectiveScanBackward<T, Acc>& g,
                                                      SelectiveScanShape s, int64_t n, int64_t d,
                                                      int64_t begin, int64_t end,
                                                      const SegmentScratch<Acc>& scratch) {
  Acc* carry = scratch.carry;
  const int64_t group_row = n * s.groups() + d / s.group;
  const T* A_row = g.A + d * s.states;
  Acc* grad_A = g.grad_A + (n * s.channels + d) * s.states;
  for (int64_t t = end - 1; t >= begin; --t) {
    const int64_t i = (n * s.length + t) * s.channels + d;
    const int64_t row = (n * s.length + t) * s.states;
    const int64_t partial_row = (group_row * s.length + t) * s.states;
    const Acc delta = static_cast<Acc>(g.delta[i]);
    const Acc u = static_cast<Acc>(g.u[i]);
    const Acc grad_y = static_cast<Acc>(g.grad_y[i]);
    const Acc* h = scratch.states + (t - begin + 1) * s.states;
    const Acc* previous = scratch.states + (t - begin) * s.states;
    const Acc* exps = scratch.exps + (t - begin) * s.states;
    Acc grad_delta = Acc(0), grad_u = Acc(0);
    // In blocks of kStateBlock states: first every state's own terms (independent across
    // states, so the CPU compiler vectorizes the loop), then their sums into grad_Δ and grad_u
    // state by state, in the same order as one loop would add them.
    for (int64_t k0 = 0; k0 < s.states; k0 += kStateBlock) {
      const int64_t count = s.states - k0 < kStateBlock ? s.states - k0 : kStateBlock;
      Acc delta_terms[kStateBlock], u_terms[kStateBlock];
      selective_state_grads<T, Acc>(g, A_row + k0, row + k0, partial_row + k0, grad_A + k0, h + k0,
                                    previous + k0, exps + k0, carry + k0, delta, u, grad_y, count,
                                    delta_terms, u_terms);
      for (int64_t j = 0; j < count; ++j) {
        grad_delta += delta_terms[j];
        grad_u += u_terms[j];
      }
    }
    g.grad_u[i] = static_cast<T>(grad_u);
    g.grad_delta[i] = static_cast<T>(grad_delta);
  }
}

// One backward work item: channels [group · index, ...) of batch row n, each all the way back.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void selective_scan_backward_group(const SelectiveScanBackward<T, Acc>& g,
                                                         SelectiveScanShape s, int64_t item) {
  const int64_t n = item / s.groups();
  const int64_t first = (item % s.groups()) * s.group;
  const int64_t last = first + s.group < s.channels ? first + s.group : s.channels;
  Acc* base = g.scratch + item * segment_scratch_size(s);
  const SegmentScratch<Acc> scratch{base, base + (s.segment + 1) * s.states,
                                    base + (2 * s.segment + 1) * s.states};
  Acc* carry = scratch.carry;
  for (int64_t t = 0; t < s.length; ++t) {
    for (int64_t k = 0; k < s.states; ++k) {
      g.grad_B[((n * s.groups() + first / s.group) * s.length + t) * s.states + k] = Acc(0);
      g.grad_C[((n * s.groups() + first / s.group) * s.length + t) * s.states + k] = Acc(0);
    }
  }
  for (int64_t d = first; d < last; ++d) {
    const int64_t channel_index = n * s.channels + d;
    for (int64_t k = 0; k < s.states; ++k) {
      carry[k] = g.grad_h_last ? g.grad_h_last[channel_index * s.states + k] : Acc(0);
      g.grad_A[channel_index * s.states + k] = Acc(0);
    }
    for (int64_t segment = s.segments() - 1; segment >= 0; --segment) {
      const int64_t begin = segment * s.segment;
      const int64_t end = begin + s.segment < s.length ? begin + s.segment : s.length;
      const Acc* saved = g.checkpoints + ((n * s.segments() + segment) * s.channels + d) * s.states;
      for (int64_t k = 0; k < s.states; ++k) scratch.states[k] = saved[k];
      for (int64_t t = begin; t < end; ++t) {
        Acc* state = scratch.states + (t - begin + 1) * s.states;
        for (int64_t k = 0; k < s.states; ++k) state[k] = state[k - s.states];
        const int64_t i = (n * s.length + t) * s.channels + d;
        const Acc delta = static_cast<Acc>(g.delta[i]);
        selective_step<T, Acc>(state, delta, delta * static_cast<Acc>(g.u[i]), g.A + d * s.states,
                               g.B + (n * s.length + t) * s.states, static_cast<const T*>(nullptr),
                               scratch.exps + (t - begin) * s.states, s.states,
                               g.negative_eigenvalues);
      }
      selective_segment_backward<T, Acc>(g, s, n, d, begin, end, scratch);
    }
    if (g.grad_h0) {
      for (int64_t k = 0; k < s.states; ++k) g.grad_h0[channel_index * s.states + k] = carry[k];
    }
  }
}

// CUDA per-thread bodies: forward, one thread per (batch, channel); backward, one thread per
// (batch, group). The tests run them on the CPU over every block and thread.
constexpr int64_t kSelectiveScanThreadsPerBlock = 64;

template <typename T, typename Acc>
MS_HOST_DEVICE inline void selective_scan_thread(const SelectiveScanForward<T, Acc>& f,
                                                 SelectiveScanShape s, int64_t block,
                                                 int64_t thread, int64_t threads_per_block) {
  const int64_t channel_index = block * threads_per_block + thread;
  if (channel_index < s.batch * s.channels) selective_scan_channel<T, Acc>(f, s, channel_index);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void selective_scan_backward_thread(const SelectiveScanBackward<T, Acc>& g,
                                                          SelectiveScanShape s, int64_t block,
                                                          int64_t thread,
                                                          int64_t threads_per_block) {
  const int64_t item = block * threads_per_block + thread;
  if (item < s.batch * s.groups()) selective_scan_backward_group<T, Acc>(g, s, item);
}

inline int64_t selective_scan_blocks(int64_t threads) {
  return (threads + kSelectiveScanThreadsPerBlock - 1) / kSelectiveScanThreadsPerBlock;
}

// CPU: forward over channels [begin, end) of batch × channels; backward over work items
// [begin, end) of batch × groups. Up to sixteen channels of a batch row step together, one per
// vector lane, each evaluating the bodies above in the same order; grad_B and grad_C add the
// lanes in channel order, as one channel after another would (the same bits).
void selective_scan_forward_cpu(const SelectiveScanForward<float, float>& f, SelectiveScanShape s,
                                int64_t begin, int64_t end);
void selective_scan_forward_cpu(const SelectiveScanForward<double, double>& f, SelectiveScanShape s,
                                int64_t begin, int64_t end);
void selective_scan_backward_cpu(const SelectiveScanBackward<float, float>& g, SelectiveScanShape s,
                                 int64_t begin, int64_t end);
void selective_scan_backward_cpu(const SelectiveScanBackward<double, double>& g,
                                 SelectiveScanShape s, int64_t begin, int64_t end);

// CUDA, float32 (kernels/common/cuda_device.h says what a launcher takes and returns).
MEMSCRIPT_CUDA_LAUNCHER(selective_scan_forward_cuda, const SelectiveScanForward<float, float>&,
                        SelectiveScanShape);
MEMSCRIPT_CUDA_LAUNCHER(selective_scan_backward_cuda, const SelectiveScanBackward<float, float>&,
                        SelectiveScanShape);

}  // namespace memscript::kernels
