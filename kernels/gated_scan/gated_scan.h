#pragma once

// Diagonal recurrences with their gates fused in: the whole cell of qLSTM and of minGRU, from
// the input projection's pre-activations to the cell's output, in one pass over the sequence.
// The plain diagonal scan needs the gates as tensors, which costs a dozen small tensor ops per
// layer and direction; at the sizes of the study (d_model 4) those were most of a training step.
//
// Layout (contiguous): the pre-activations `pre` are [batch, length, slots · hidden], slot s of
// channel c at s · hidden + c (the order the input projection's rows are in); states, outputs
// [batch, length, hidden]; the initial / final state [batch, hidden].
//
//   qLSTM (slots f, i, z, o; a forget bias b per channel):
//     f = σ(pre_f + b + 1)  (or 2σ(·) − 1 with negative eigenvalues)
//     c_t = f ⊙ c_{t-1} + σ(pre_i) ⊙ tanh(pre_z),   y_t = σ(pre_o) ⊙ tanh(c_t)
//   minGRU (slots z, h̃):
//     z = σ(pre_z),  h_t = (1 − z) ⊙ h_{t-1} + z ⊙ pre_h̃  (carry 1 − 2z with negative
//     eigenvalues),  y_t = h_t (the outputs are the states)
//
// Backward walks the sequence in reverse from the saved states, recomputing the gates from
// `pre`: grad_pre [batch, length, slots · hidden] and the carry into the initial state. The
// forget bias's gradient is the sum of grad_pre's f slot over batch and length (block_sum.h,
// with one block per step).
//
// Every gate is a·σ(k·(x + shift)) + b (GateActivation), and the cells' formulas are the inline
// functions below, shared by the CUDA kernel (one thread per batch row and channel, all the
// steps of one channel) and the CPU loop. The CPU loop steps the channels of several batch rows
// side by side (at least 32 channels: a batch row has 4 in the study's models, too few for a
// vector register) in chunks of steps: the chunk's inputs are gathered into [step][channel]
// arrays, then every gate of the chunk is computed, then the recurrence itself (the only part
// that has to go step by step, one vector operation per step for all the channels), then the
// outputs, which are scattered back. Both evaluate the same expressions in the same order, so
// they agree to the bit.

#include <cstdint>

#include "kernels/common/cuda_device.h"
#include "kernels/common/fast_exp.h"
#include "kernels/common/host_device.h"
#include "kernels/common/storage_type.h"

namespace memscript::kernels {

template <typename Acc>
MS_HOST_DEVICE inline Acc sigmoid_of(Acc x) {
  return Acc(1) / (Acc(1) + exp_of(-x));
}

// a·σ(k·(x + shift)) + b: σ is (1, 1, 0, 0), tanh = 2σ(2x) − 1 is (2, 2, −1, 0), qLSTM's forget
// gate is (1, 1, 0, b + 1) or, with negative eigenvalues, (2, 1, −1, b + 1).
template <typename Acc>
struct GateActivation {
  Acc scale;   // a
  Acc slope;   // k
  Acc offset;  // b
  Acc shift;
};

template <typename Acc>
MS_HOST_DEVICE inline GateActivation<Acc> sigmoid_gate() {
  return {Acc(1), Acc(1), Acc(0), Acc(0)};
}
template <typename Acc>
MS_HOST_DEVICE inline GateActivation<Acc> tanh_gate() {
  return {Acc(2), Acc(2), Acc(-1), Acc(0)};
}
template <typename Acc>
MS_HOST_DEVICE inline GateActivation<Acc> forget_gate(Acc bias, bool negative) {
  return {negative ? Acc(2) : Acc(1), Acc(1), negative ? Acc(-1) : Acc(0), bias + Acc(1)};
}

template <typename Acc>
MS_HOST_DEVICE inline Acc activate(Acc x, GateActivation<Acc> g) {
  return g.scale * sigmoid_of(g.slope * (x + g.shift)) + g.offset;
}

// d activate / dx, from the gate's value y: a·k·s·(1 − s) with s = (y − b) / a. Every gate's a
// is 1 or 2, so (y − b) · (1/a) is the same number as the division, without a division per
// element.
template <typename Acc>
MS_HOST_DEVICE inline Acc activation_slope(Acc y, GateActivation<Acc> g) {
  const Acc s = (y - g.offset) * (Acc(1) / g.scale);
  return g.scale * g.slope * s * (Acc(1) - s);
}

template <typename Acc>
MS_HOST_DEVICE inline Acc tanh_of(Acc x) {
  return activate(x, tanh_gate<Acc>());
}

// qLSTM, from the gates' values (f, i, z, o after their activations).
template <typename Acc>
MS_HOST_DEVICE inline Acc qlstm_state(Acc f, Acc i, Acc z, Acc previous) {
  return f * previous + i * z;
}
template <typename Acc>
MS_HOST_DEVICE inline Acc qlstm_output(Acc o, Acc state) {
  return o * tanh_of(state);
}
// What the output y_t = o · tanh(c_t) hands back: to c_t, and to o's pre-activation.
template <typename Acc>
struct QlstmOutputGrads {
  Acc state;
  Acc pre_o;
};
// The same from tanh(c_t), for a caller that has it already.
template <typename Acc>
MS_HOST_DEVICE inline QlstmOutputGrads<Acc> qlstm_output_grads_of_tanh(Acc o, Acc tanh_c,
                                                                       Acc grad_y) {
  return {grad_y * o * (Acc(1) - tanh_c * tanh_c),
          grad_y * tanh_c * activation_slope(o, sigmoid_gate<Acc>())};
}
template <typename Acc>
MS_HOST_DEVICE inline QlstmOutputGrads<Acc> qlstm_output_grads(Acc o, Acc state, Acc grad_y) {
  return qlstm_output_grads_of_tanh(o, tanh_of(state), grad_y);
}

// minGRU, from z = σ(pre_z) and the candidate h̃ (= pre_h̃).
template <typename Acc>
MS_HOST_DEVICE inline Acc mingru_keep(Acc z, bool negative) {
  return negative ? Acc(1) - Acc(2) * z : Acc(1) - z;
}
template <typename Acc>
MS_HOST_DEVICE inline Acc mingru_state(Acc z, Acc candidate, Acc previous, bool negative) {
  return mingru_keep(z, negative) * previous + z * candidate;
}
// d h_t / d pre_z, times the gradient reaching h_t.
template <typename Acc>
MS_HOST_DEVICE inline Acc mingru_grad_pre_z(Acc z, Acc candidate, Acc previous, Acc grad_h,
                                            bool negative) {
  const Acc d_keep = negative ? Acc(-2) : Acc(-1);
  return grad_h * (d_keep * previous + candidate) * activation_slope(z, sigmoid_gate<Acc>());
}

enum class GatedCellKind { qlstm, mingru };

inline int gated_slots(GatedCellKind kind) { return kind == GatedCellKind::qlstm ? 4 : 2; }

struct GatedScanShape {
  int64_t batch;
  int64_t length;
  int64_t hidden;
};

// States (and the initial and final state) are kept in the accumulation type: float for bf16
// inputs on the GPU, so that the backward reads the states the forward computed, unrounded.
template <typename T>
struct GatedScanForward {
  using Acc = AccumulatorOf<T>;
  const T* pre;        // [batch, length, slots · hidden]
  const T* bias;       // [hidden] (qLSTM's forget bias), or null
  const Acc* initial;  // [batch, hidden], or null: zero state
  Acc* states;         // [batch, length, hidden]
  T* outputs;          // [batch, length, hidden]; for minGRU (whose outputs are its states) null
                       // unless T is not Acc
  Acc* last;           // [batch, hidden], or null
  bool negative;
};

template <typename T>
struct GatedScanBackward {
  using Acc = AccumulatorOf<T>;
  const T* pre;
  const T* bias;
  const Acc* initial;
  const Acc* states;      // from the forward
  const T* grad_outputs;  // [batch, length, hidden] (for minGRU: the gradient of the states)
  const Acc* grad_last;   // [batch, hidden], or null
  T* grad_pre;            // [batch, length, slots · hidden]
  Acc* grad_initial;      // [batch, hidden], or null
  bool negative;
};

// --- The CUDA kernels' per-thread bodies: one channel of one batch row through every step. ---

template <typename T, typename Acc>
MS_HOST_DEVICE inline void qlstm_channel(const GatedScanForward<T>& a, GatedScanShape shape,
                                         int64_t n, int64_t c) {
  const int64_t hidden = shape.hidden;
  const GateActivation<Acc> forget =
      forget_gate<Acc>(a.bias ? load(a.bias[c]) : Acc(0), a.negative);
  Acc state = a.initial ? load(a.initial[n * hidden + c]) : Acc(0);
  for (int64_t t = 0; t < shape.length; ++t) {
    const T* p = a.pre + (n * shape.length + t) * 4 * hidden + c;
    const Acc f = activate(load(p[0]), forget);
    const Acc i = activate(load(p[hidden]), sigmoid_gate<Acc>());
    const Acc z = activate(load(p[2 * hidden]), tanh_gate<Acc>());
    const Acc o = activate(load(p[3 * hidden]), sigmoid_gate<Acc>());
    state = qlstm_state(f, i, z, state);
    const int64_t at = (n * shape.length + t) * hidden + c;
    store(state, &a.states[at]);
    store(qlstm_output(o, state), &a.outputs[at]);
  }
  if (a.last) store(state, &a.last[n * hidden + c]);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void qlstm_backward_channel(const GatedScanBackward<T>& a,
                                                  GatedScanShape shape, int64_t n, int64_t c) {
  const int64_t hidden = shape.hidden;
  const GateActivation<Acc> forget =
      forget_gate<Acc>(a.bias ? load(a.bias[c]) : Acc(0), a.negative);
  Acc carry = a.grad_last ? load(a.grad_last[n * hidden + c]) : Acc(0);
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const int64_t p_at = (n * shape.length + t) * 4 * hidden + c;
    const int64_t at = (n * shape.length + t) * hidden + c;
    const T* p = a.pre + p_at;
    const Acc f = activate(load(p[0]), forget);
    const Acc i = activate(load(p[hidden]), sigmoid_gate<Acc>());
    const Acc z = activate(load(p[2 * hidden]), tanh_gate<Acc>());
    const Acc o = activate(load(p[3 * hidden]), sigmoid_gate<Acc>());
    Acc previous = Acc(0);
    if (t > 0) {
      previous = load(a.states[at - hidden]);
    } else if (a.initial) {
      previous = load(a.initial[n * hidden + c]);
    }
    const QlstmOutputGrads<Acc> out =
        qlstm_output_grads(o, load(a.states[at]), load(a.grad_outputs[at]));
    const Acc grad_c = out.state + carry;
    T* g = a.grad_pre + p_at;
    store(grad_c * previous * activation_slope(f, forget), &g[0]);
    store(grad_c * z * activation_slope(i, sigmoid_gate<Acc>()), &g[hidden]);
    store(grad_c * i * activation_slope(z, tanh_gate<Acc>()), &g[2 * hidden]);
    store(out.pre_o, &g[3 * hidden]);
    carry = grad_c * f;
  }
  if (a.grad_initial) store(carry, &a.grad_initial[n * hidden + c]);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void mingru_channel(const GatedScanForward<T>& a, GatedScanShape shape,
                                          int64_t n, int64_t c) {
  const int64_t hidden = shape.hidden;
  Acc state = a.initial ? load(a.initial[n * hidden + c]) : Acc(0);
  for (int64_t t = 0; t < shape.length; ++t) {
    const T* p = a.pre + (n * shape.length + t) * 2 * hidden + c;
    const Acc z = activate(load(p[0]), sigmoid_gate<Acc>());
    state = mingru_state(z, load(p[hidden]), state, a.negative);
    const int64_t at = (n * shape.length + t) * hidden + c;
    store(state, &a.states[at]);
    if (a.outputs) store(state, &a.outputs[at]);
  }
  if (a.last) store(state, &a.last[n * hidden + c]);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void mingru_backward_channel(const GatedScanBackward<T>& a,
                                                   GatedScanShape shape, int64_t n, int64_t c) {
  const int64_t hidden = shape.hidden;
  Acc carry = a.grad_last ? load(a.grad_last[n * hidden + c]) : Acc(0);
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const int64_t p_at = (n * shape.length + t) * 2 * hidden + c;
    const int64_t at = (n * shape.length + t) * hidden + c;
    const Acc z = activate(load(a.pre[p_at]), sigmoid_gate<Acc>());
    const Acc candidate = load(a.pre[p_at + hidden]);
    Acc previous = Acc(0);
    if (t > 0) {
      previous = load(a.states[at - hidden]);
    } else if (a.initial) {
      previous = load(a.initial[n * hidden + c]);
    }
    const Acc grad_h = load(a.grad_outputs[at]) + carry;
    store(mingru_grad_pre_z(z, candidate, previous, grad_h, a.negative), &a.grad_pre[p_at]);
    store(grad_h * z, &a.grad_pre[p_at + hidden]);
    carry = grad_h * mingru_keep(z, a.negative);
  }
  if (a.grad_initial) store(carry, &a.grad_initial[n * hidden + c]);
}

// Thread (block, thread) owns channel index n · hidden + c.
constexpr int64_t kGatedScanThreadsPerBlock = 128;

inline int64_t gated_scan_blocks(GatedScanShape shape) {
  return (shape.batch * shape.hidden + kGatedScanThreadsPerBlock - 1) / kGatedScanThreadsPerBlock;
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void gated_scan_thread(GatedCellKind kind, const GatedScanForward<T>& a,
                                             GatedScanShape shape, int64_t block, int64_t thread,
                                             int64_t threads_per_block) {
  const int64_t index = block * threads_per_block + thread;
  if (index >= shape.batch * shape.hidden) return;
  if (kind == GatedCellKind::qlstm) {
    qlstm_channel<T, Acc>(a, shape, index / shape.hidden, index % shape.hidden);
  } else {
    mingru_channel<T, Acc>(a, shape, index / shape.hidden, index % shape.hidden);
  }
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void gated_scan_backward_thread(GatedCellKind kind,
                                                      const GatedScanBackward<T>& a,
                                                      GatedScanShape shape, int64_t block,
                                                      int64_t thread, int64_t threads_per_block) {
  const int64_t index = block * threads_per_block + thread;
  if (index >= shape.batch * shape.hidden) return;
  if (kind == GatedCellKind::qlstm) {
    qlstm_backward_channel<T, Acc>(a, shape, index / shape.hidden, index % shape.hidden);
  } else {
    mingru_backward_channel<T, Acc>(a, shape, index / shape.hidden, index % shape.hidden);
  }
}

// CPU: batch rows [begin, end).
void gated_scan_forward_cpu(GatedCellKind kind, const GatedScanForward<float>& args,
                            GatedScanShape shape, int64_t begin, int64_t end);
void gated_scan_forward_cpu(GatedCellKind kind, const GatedScanForward<double>& args,
                            GatedScanShape shape, int64_t begin, int64_t end);
void gated_scan_backward_cpu(GatedCellKind kind, const GatedScanBackward<float>& args,
                             GatedScanShape shape, int64_t begin, int64_t end);
void gated_scan_backward_cpu(GatedCellKind kind, const GatedScanBackward<double>& args,
                             GatedScanShape shape, int64_t begin, int64_t end);

// CUDA: device pointers, float32 or bf16 (computed in float32), launched on `stream`. Returns
// false when this build has no CUDA kernels or the launch failed; the message says why.
MEMSCRIPT_CUDA_LAUNCHER(gated_scan_forward_cuda, GatedCellKind, const GatedScanForward<float>&,
                        GatedScanShape);
MEMSCRIPT_CUDA_LAUNCHER(gated_scan_forward_cuda, GatedCellKind, const GatedScanForward<Bf16>&,
                        GatedScanShape);
MEMSCRIPT_CUDA_LAUNCHER(gated_scan_backward_cuda, GatedCellKind, const GatedScanBackward<float>&,
                        GatedScanShape);
MEMSCRIPT_CUDA_LAUNCHER(gated_scan_backward_cuda, GatedCellKind, const GatedScanBackward<Bf16>&,
                        GatedScanShape);

}  // namespace memscript::kernels
