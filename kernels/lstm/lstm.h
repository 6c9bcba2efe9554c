#pragma once

// The classic LSTM's recurrence, fused: everything but the input projection, which is one
// matrix product over all tokens (x W_ihᵀ + b_ih + b_hh) done before. Gate order as libtorch's
// (i, f, g, o), so the parameters are those of torch::nn::LSTM:
//
//   z_t = pre_t + W_hh h_{t-1}                    [4 · hidden]
//   i = σ(z_i), f = σ(z_f), g = tanh(z_g), o = σ(z_o)
//   c_t = f ⊙ c_{t-1} + i ⊙ g,   h_t = o ⊙ tanh(c_t)
//
// Layout (contiguous): pre and the activated gates [batch, length, 4 · hidden]; outputs (h_t)
// and cells (c_t) [batch, length, hidden]; h0, c0, h_last, c_last [batch, hidden]. The
// recurrent weight comes twice: W_hh [4 · hidden, hidden] for the backward and its transpose
// [hidden, 4 · hidden] for the forward, so that both products run along contiguous rows:
//   forward    z[:]      += W_hhᵀ[j, :] · h_{t-1}[j]   for j = 0, 1, …
//   backward   carry[:]  += W_hh[m, :] · grad_z[m]     for m = 0, 1, …
//   grad_W_hh  gW[m, :]  += grad_z[m] · h_{t-1}[:]
// Each of those sums runs in a fixed order, whatever the vector width.
//
// Work unit: one batch row, all its steps (the recurrence couples every channel of the row
// through W_hh). The forward saves the activated gates and the cells when a backward is to
// come; the backward walks the row in reverse from them. grad_W_hh is summed per batch row into
// its own [4 · hidden, hidden] partial, and the caller adds the partials in row order
// (block_sum.h): the same bits for any thread count. The CPU steps sixteen batch rows side by
// side, one per vector lane, each lane evaluating the row bodies' expressions in the same order
// (the same bits). The CUDA kernels give each batch row a block whose threads split the
// channels: one thread per gate for W_hh h_{t-1}, one per hidden channel for the cell (the
// cell formulas are lstm_cell and lstm_cell_backward, shared with the rows).

#include <cstdint>

#include "kernels/common/cuda_device.h"
#include "kernels/common/host_device.h"
#include "kernels/gated_scan/gated_scan.h"

namespace memscript::kernels {

struct LstmShape {
  int64_t batch;
  int64_t length;
  int64_t hidden;

  MS_HOST_DEVICE int64_t gates() const { return 4 * hidden; }
};

template <typename T>
struct LstmForward {
  const T* pre;          // [batch, length, 4 · hidden]
  const T* weight_hh_t;  // W_hhᵀ [hidden, 4 · hidden]
  const T* h0;           // [batch, hidden], or null: zeros
  const T* c0;           // same
  T* outputs;            // h_t [batch, length, hidden]
  T* gates;              // activated i, f, g, o [batch, length, 4 · hidden], or null (no backward)
  T* cells;              // c_t [batch, length, hidden], or null (no backward)
  T* h_last;             // [batch, hidden]: the running state, required
  T* c_last;             // same
  T* scratch;            // [batch, 4 · hidden]: the gates of the step when `gates` is null
};

template <typename T>
struct LstmBackward {
  const T* weight_hh;  // W_hh [4 · hidden, hidden]
  const T* h0;         // as in the forward
  const T* c0;
  const T* outputs;  // from the forward
  const T* gates;
  const T* cells;
  const T* grad_outputs;  // [batch, length, hidden]
  const T* grad_h_last;   // [batch, hidden], or null
  const T* grad_c_last;   // same
  T* grad_pre;            // [batch, length, 4 · hidden]
  T* grad_weight_hh;      // per-row partials [batch, 4 · hidden, hidden]
  T* grad_h0;             // [batch, hidden], or null
  T* grad_c0;             // same
  T* scratch;             // [batch, 4 · hidden]
};

// Channel j's cell from the activated gates z = (i, f, g, o) [4 · hidden]: c ← f c + i g,
// h = o tanh(c). Written once for a number type N: one number (the rows, the CUDA kernel) or a
// vector of lanes, one batch row per lane (the CPU, which takes tanh lane by lane).
template <typename N>
MS_HOST_DEVICE inline void lstm_cell_state(const N* z, int64_t hidden, int64_t j, N& c) {
  c = z[hidden + j] * c + z[j] * z[2 * hidden + j];
}

template <typename T>
MS_HOST_DEVICE inline void lstm_cell(const T* z, int64_t hidden, int64_t j, T& c, T& h) {
  lstm_cell_state(z, hidden, j, c);
  h = z[3 * hidden + j] * tanh_of(c);
}

// The backward of channel j's cell: from the gates z, tanh(c_t), c_{t-1} and gh (what reaches
// h_t), writes the four pre-activation gradients grad_z[slot · hidden + j] and turns carry_c
// (what reaches c_t from later steps) into what reaches c_{t-1}. N as for lstm_cell_state.
template <typename N>
MS_HOST_DEVICE inline void lstm_cell_backward_of_tanh(const N* z, N tanh_c, N c_prev, N gh,
                                                      int64_t hidden, int64_t j, N* grad_z,
                                                      N& carry_c) {
  const N i = z[j], f = z[hidden + j], g = z[2 * hidden + j], o = z[3 * hidden + j];
  const N gc = carry_c + gh * o * (1 - tanh_c * tanh_c);
  grad_z[j] = gc * g * (i * (1 - i));
  grad_z[hidden + j] = gc * c_prev * (f * (1 - f));
  grad_z[2 * hidden + j] = gc * i * (1 - g * g);
  grad_z[3 * hidden + j] = gh * tanh_c * (o * (1 - o));
  carry_c = gc * f;
}

template <typename T>
MS_HOST_DEVICE inline void lstm_cell_backward(const T* z, T c, T c_prev, T gh, int64_t hidden,
                                              int64_t j, T* grad_z, T& carry_c) {
  lstm_cell_backward_of_tanh(z, tanh_of(c), c_prev, gh, hidden, j, grad_z, carry_c);
}

// Step t of batch row n: the gates from pre_t and h_{t-1} (in h_last), then c_t and h_t.
template <typename T>
MS_HOST_DEVICE inline void lstm_step(const LstmForward<T>& a, LstmShape s, int64_t n, int64_t t) {
  const int64_t hidden = s.hidden, width = s.gates();
  const int64_t row = n * s.length + t;
  const T* __restrict__ pre = a.pre + row * width;
  T* __restrict__ z = a.gates ? a.gates + row * width : a.scratch + n * width;
  T* __restrict__ h = a.h_last + n * hidden;
  T* __restrict__ c = a.c_last + n * hidden;
  for (int64_t m = 0; m < width; ++m) z[m] = pre[m];
  for (int64_t j = 0; j < hidden; ++j) {
    const T h_j = h[j];
    const T* __restrict__ w = a.weight_hh_t + j * width;
    for (int64_t m = 0; m < width; ++m) z[m] += w[m] * h_j;
  }
  // i, f and o through σ, g through tanh = 2σ(2x) − 1 (gated_scan.h's gates).
  for (int64_t slot = 0; slot < 4; ++slot) {
    const GateActivation<T> gate = slot == 2 ? tanh_gate<T>() : sigmoid_gate<T>();
    T* __restrict__ x = z + slot * hidden;
    for (int64_t j = 0; j < hidden; ++j) x[j] = activate(x[j], gate);
  }
  T* __restrict__ h_out = a.outputs + row * hidden;
  for (int64_t j = 0; j < hidden; ++j) {
    lstm_cell(z, hidden, j, c[j], h[j]);
    h_out[j] = h[j];
  }
  if (a.cells) {
    T* __restrict__ c_out = a.cells + row * hidden;
    for (int64_t j = 0; j < hidden; ++j) c_out[j] = c[j];
  }
}

template <typename T>
MS_HOST_DEVICE inline void lstm_forward_row(const LstmForward<T>& a, LstmShape s, int64_t n) {
  for (int64_t j = 0; j < s.hidden; ++j) {
    a.h_last[n * s.hidden + j] = a.h0 ? a.h0[n * s.hidden + j] : T(0);
    a.c_last[n * s.hidden + j] = a.c0 ? a.c0[n * s.hidden + j] : T(0);
  }
  for (int64_t t = 0; t < s.length; ++t) lstm_step(a, s, n, t);
}

// Batch row n in reverse. scratch: grad_h [hidden] (what reaches h_{t-1}), carry_h [hidden]
// (what reaches h_t from later steps), carry_c [hidden] (c_t's, through f), zeros [hidden]
// (the state before the first step when no h0, c0 is given).
template <typename T>
MS_HOST_DEVICE inline void lstm_backward_row(const LstmBackward<T>& a, LstmShape s, int64_t n) {
  const int64_t hidden = s.hidden, width = s.gates();
  T* __restrict__ grad_h = a.scratch + n * 4 * hidden;
  T* __restrict__ carry_h = grad_h + hidden;
  T* __restrict__ carry_c = carry_h + hidden;
  T* zeros = carry_c + hidden;
  T* __restrict__ grad_w = a.grad_weight_hh + n * width * hidden;
  for (int64_t j = 0; j < hidden; ++j) {
    carry_h[j] = a.grad_h_last ? a.grad_h_last[n * hidden + j] : T(0);
    carry_c[j] = a.grad_c_last ? a.grad_c_last[n * hidden + j] : T(0);
    zeros[j] = T(0);
  }
  for (int64_t m = 0; m < width * hidden; ++m) grad_w[m] = T(0);
  const T* h_initial = a.h0 ? a.h0 + n * hidden : zeros;
  const T* c_initial = a.c0 ? a.c0 + n * hidden : zeros;
  for (int64_t t = s.length - 1; t >= 0; --t) {
    const int64_t row = n * s.length + t;
    const T* __restrict__ z = a.gates + row * width;
    const T* __restrict__ c = a.cells + row * hidden;
    const T* __restrict__ grad_y = a.grad_outputs + row * hidden;
    const T* __restrict__ h_prev = t > 0 ? a.outputs + (row - 1) * hidden : h_initial;
    const T* __restrict__ c_prev = t > 0 ? a.cells + (row - 1) * hidden : c_initial;
    T* __restrict__ grad_z = a.grad_pre + row * width;
    for (int64_t j = 0; j < hidden; ++j) {
      lstm_cell_backward(z, c[j], c_prev[j], grad_y[j] + carry_h[j], hidden, j, grad_z, carry_c[j]);
      grad_h[j] = T(0);
    }
    // W_hhᵀ grad_z into h_{t-1}, and grad_z ⊗ h_{t-1} into W_hh's gradient, a row m at a time.
    for (int64_t m = 0; m < width; ++m) {
      const T g_m = grad_z[m];
      const T* __restrict__ w = a.weight_hh + m * hidden;
      T* __restrict__ gw = grad_w + m * hidden;
      for (int64_t j = 0; j < hidden; ++j) grad_h[j] += w[j] * g_m;
      for (int64_t j = 0; j < hidden; ++j) gw[j] += g_m * h_prev[j];
    }
    for (int64_t j = 0; j < hidden; ++j) carry_h[j] = grad_h[j];
  }
  for (int64_t j = 0; j < hidden; ++j) {
    if (a.grad_h0) a.grad_h0[n * hidden + j] = carry_h[j];
    if (a.grad_c0) a.grad_c0[n * hidden + j] = carry_c[j];
  }
}

// CPU: batch rows [begin, end).
void lstm_forward_cpu(const LstmForward<float>& a, LstmShape s, int64_t begin, int64_t end);
void lstm_forward_cpu(const LstmForward<double>& a, LstmShape s, int64_t begin, int64_t end);
void lstm_backward_cpu(const LstmBackward<float>& a, LstmShape s, int64_t begin, int64_t end);
void lstm_backward_cpu(const LstmBackward<double>& a, LstmShape s, int64_t begin, int64_t end);

// CUDA, float32: device pointers, launched on `stream`; false (with a message) when this build
// has no CUDA kernels or the launch failed. `scratch` is not used: the state lives in shared
// memory.
MEMSCRIPT_CUDA_LAUNCHER(lstm_forward_cuda, const LstmForward<float>&, LstmShape);
MEMSCRIPT_CUDA_LAUNCHER(lstm_backward_cuda, const LstmBackward<float>&, LstmShape);

}  // namespace memscript::kernels
