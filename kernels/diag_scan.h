#pragma once

// Diagonal linear scan, the recurrence under qLSTM and minGRU:
//   h[n, t, c] = a[n, t, c] * h[n, t-1, c] + b[n, t, c],   h[n, -1, c] = h0[n, c]
// Tensors are contiguous [batch, length, channels]; the state h0 / h_last is [batch, channels].
// Every (n, c) pair is an independent channel, which is what the CPU loop and the CUDA
// threads split between them.
//
// Backward, a scan in reverse over the same channels. With g = dLoss/dh and g_last =
// dLoss/dh_last (the gradient that flows in from the final state):
//   grad_b[t] = g[t] + a[t+1] * grad_b[t+1],   grad_b[L-1] = g[L-1] + g_last
//   grad_a[t] = grad_b[t] * h[t-1],             grad_h0 = a[0] * grad_b[0]
// It reads the forward's h rather than recomputing it: h has the size of the inputs anyway.

#include <cstdint>

#include "host_device.h"

namespace memscript::kernels {

struct DiagScanShape {
  int64_t batch;
  int64_t length;
  int64_t channels;
};

// Where channel `channel_index` (= n · channels + c) starts in a [batch, length, channels]
// tensor; step t is at base + t · channels.
MS_HOST_DEVICE inline int64_t channel_base(DiagScanShape shape, int64_t channel_index) {
  return (channel_index / shape.channels) * shape.length * shape.channels +
         channel_index % shape.channels;
}

// Runs one channel through all time steps. State is kept in the accumulation type Acc so
// that bf16 inputs on the GPU still carry a float32 state.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void diag_scan_channel(const T* a, const T* b, const T* h0, T* h, T* h_last,
                                             DiagScanShape shape, int64_t channel_index) {
  const int64_t base = channel_base(shape, channel_index);
  Acc state = h0 ? static_cast<Acc>(h0[channel_index]) : Acc(0);
  for (int64_t t = 0; t < shape.length; ++t) {
    const int64_t i = base + t * shape.channels;
    state = static_cast<Acc>(a[i]) * state + static_cast<Acc>(b[i]);
    h[i] = static_cast<T>(state);
  }
  if (h_last) h_last[channel_index] = static_cast<T>(state);
}

// What the backward reads and writes. h0, grad_h_last and grad_h0 may be null (zero state,
// no gradient from the final state, no gradient wanted for h0).
template <typename T>
struct DiagScanGrads {
  const T* a;
  const T* h;
  const T* h0;
  const T* grad_h;
  const T* grad_h_last;
  T* grad_a;
  T* grad_b;
  T* grad_h0;
};

template <typename T, typename Acc>
MS_HOST_DEVICE inline void diag_scan_backward_channel(const DiagScanGrads<T>& g,
                                                      DiagScanShape shape, int64_t channel_index) {
  const int64_t channels = shape.channels;
  const int64_t base = channel_base(shape, channel_index);
  // a[t+1] * grad_b[t+1]: what step t+1 hands back to step t.
  Acc carry = g.grad_h_last ? static_cast<Acc>(g.grad_h_last[channel_index]) : Acc(0);
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const int64_t i = base + t * channels;
    const Acc grad_b = static_cast<Acc>(g.grad_h[i]) + carry;
    Acc previous = Acc(0);
    if (t > 0) {
      previous = static_cast<Acc>(g.h[i - channels]);
    } else if (g.h0) {
      previous = static_cast<Acc>(g.h0[channel_index]);
    }
    g.grad_b[i] = static_cast<T>(grad_b);
    g.grad_a[i] = static_cast<T>(grad_b * previous);
    carry = static_cast<Acc>(g.a[i]) * grad_b;
  }
  if (g.grad_h0) g.grad_h0[channel_index] = static_cast<T>(carry);
}

// The CUDA kernels' per-thread bodies: which channel a (block, thread) pair owns. Kept here so
// the tests can run them on the CPU by looping over blocks x threads.
inline MS_HOST_DEVICE int64_t diag_scan_thread_channel(DiagScanShape shape, int64_t block,
                                                       int64_t thread, int64_t threads_per_block) {
  const int64_t channel_index = block * threads_per_block + thread;
  return channel_index < shape.batch * shape.channels ? channel_index : -1;
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void diag_scan_thread(const T* a, const T* b, const T* h0, T* h, T* h_last,
                                            DiagScanShape shape, int64_t block, int64_t thread,
                                            int64_t threads_per_block) {
  const int64_t channel_index = diag_scan_thread_channel(shape, block, thread, threads_per_block);
  if (channel_index < 0) return;
  diag_scan_channel<T, Acc>(a, b, h0, h, h_last, shape, channel_index);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void diag_scan_backward_thread(const DiagScanGrads<T>& g, DiagScanShape shape,
                                                     int64_t block, int64_t thread,
                                                     int64_t threads_per_block) {
  const int64_t channel_index = diag_scan_thread_channel(shape, block, thread, threads_per_block);
  if (channel_index < 0) return;
  diag_scan_backward_channel<T, Acc>(g, shape, channel_index);
}

constexpr int64_t kDiagScanThreadsPerBlock = 128;

inline int64_t diag_scan_blocks(DiagScanShape shape) {
  return (shape.batch * shape.channels + kDiagScanThreadsPerBlock - 1) / kDiagScanThreadsPerBlock;
}

// CPU: channels [begin, end) of the flattened (batch, channel) index; the caller splits the
// range across its thread pool. h0 and h_last may be null.
void diag_scan_forward_cpu(const float* a, const float* b, const float* h0, float* h, float* h_last,
                           DiagScanShape shape, int64_t begin, int64_t end);
void diag_scan_forward_cpu(const double* a, const double* b, const double* h0, double* h,
                           double* h_last, DiagScanShape shape, int64_t begin, int64_t end);

void diag_scan_backward_cpu(const DiagScanGrads<float>& grads, DiagScanShape shape, int64_t begin,
                            int64_t end);
void diag_scan_backward_cpu(const DiagScanGrads<double>& grads, DiagScanShape shape, int64_t begin,
                            int64_t end);

// bf16 on the GPU travels as its raw 16 bits (the CUDA type stays out of this header); the
// state and the arithmetic are float32.
using Bf16Bits = uint16_t;

// CUDA: device pointers, launched on `stream` (a cudaStream_t). Returns false when this build
// has no CUDA kernels or the launch failed; the message then says why.
bool diag_scan_forward_cuda(const float* a, const float* b, const float* h0, float* h,
                            float* h_last, DiagScanShape shape, void* stream, const char** message);
bool diag_scan_forward_cuda(const Bf16Bits* a, const Bf16Bits* b, const Bf16Bits* h0, Bf16Bits* h,
                            Bf16Bits* h_last, DiagScanShape shape, void* stream,
                            const char** message);
bool diag_scan_backward_cuda(const DiagScanGrads<float>& grads, DiagScanShape shape, void* stream,
                             const char** message);
bool diag_scan_backward_cuda(const DiagScanGrads<Bf16Bits>& grads, DiagScanShape shape,
                             void* stream, const char** message);

bool cuda_kernels_compiled();
// GPUs the CUDA runtime sees (0 without CUDA kernels or without a GPU).
int cuda_device_count();

}  // namespace memscript::kernels
