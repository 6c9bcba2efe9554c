#pragma once

// Complex diagonal scan, the recurrence under the LRU:
//   h[n, t, c] = λ[c] · h[n, t-1, c] + b[n, t, c],   h[n, -1, c] = h0[n, c]
// with complex h, b (re/im pairs, each a contiguous real [batch, length, channels] tensor; the
// state [batch, channels]) and one complex λ per channel, shared over time and batch.
//
// Why λ per channel and not per step: the LRU's λ is a parameter, not a function of the input,
// so a per-step λ would be a [batch, length, channels] copy of the same numbers for the forward
// to read and for the backward to write gradients into. Per channel it is read once into
// registers, and its gradient is one sum per (n, c), reduced over the batch afterwards.
//
// Backward (real loss, the state as the real pair (re, im)): multiplying by λ is the real 2x2
// map [[λr, −λi], [λi, λr]], whose transpose is multiplication by conj(λ). So
//   G[t] = g[t] + conj(λ) · G[t+1],   G[L-1] = g[L-1] + g_last
//   grad_b[t] = G[t],   grad_h0 = conj(λ) · G[0]
//   grad_λr = Σ_t Re(G[t]) Re(h[t-1]) + Im(G[t]) Im(h[t-1])
//   grad_λi = Σ_t Im(G[t]) Re(h[t-1]) − Re(G[t]) Im(h[t-1])
// The λ sums are written per (n, c); the caller sums over n (in a fixed order).

#include <cstdint>

#include "kernels/common/cuda_device.h"
#include "kernels/common/host_device.h"

namespace memscript::kernels {

struct ComplexScanShape {
  int64_t batch;
  int64_t length;
  int64_t channels;
};

// Where channel `channel_index` (= n · channels + c) starts in a [batch, length, channels]
// tensor; step t is at base + t · channels.
MS_HOST_DEVICE inline int64_t channel_base(ComplexScanShape shape, int64_t channel_index) {
  return (channel_index / shape.channels) * shape.length * shape.channels +
         channel_index % shape.channels;
}

// The CUDA kernels' thread layout: thread (block, thread) owns channel index
// block · threads_per_block + thread, or none (-1) past the last.
MS_HOST_DEVICE inline int64_t complex_scan_thread_channel(ComplexScanShape shape, int64_t block,
                                                          int64_t thread,
                                                          int64_t threads_per_block) {
  const int64_t channel_index = block * threads_per_block + thread;
  return channel_index < shape.batch * shape.channels ? channel_index : -1;
}

constexpr int64_t kComplexScanThreadsPerBlock = 128;

inline int64_t complex_scan_blocks(ComplexScanShape shape) {
  return (shape.batch * shape.channels + kComplexScanThreadsPerBlock - 1) /
         kComplexScanThreadsPerBlock;
}

template <typename T>
struct ComplexScanForward {
  const T* lambda_re;  // [channels]
  const T* lambda_im;
  const T* b_re;  // [batch, length, channels]
  const T* b_im;
  const T* h0_re;  // [batch, channels], or null for a zero state
  const T* h0_im;
  T* h_re;  // [batch, length, channels]
  T* h_im;
  T* last_re;  // [batch, channels], or null
  T* last_im;
};

template <typename T>
struct ComplexScanBackward {
  const T* lambda_re;
  const T* lambda_im;
  const T* h_re;  // the forward's output
  const T* h_im;
  const T* h0_re;  // or null
  const T* h0_im;
  const T* grad_h_re;
  const T* grad_h_im;
  const T* grad_last_re;  // or null: no gradient from the final state
  const T* grad_last_im;
  T* grad_b_re;
  T* grad_b_im;
  T* grad_h0_re;  // or null: no gradient wanted
  T* grad_h0_im;
  T* grad_lambda_re;  // [batch, channels]: each batch row's share
  T* grad_lambda_im;
};

template <typename T, typename Acc>
MS_HOST_DEVICE inline void complex_scan_channel(const ComplexScanForward<T>& f,
                                                ComplexScanShape shape, int64_t channel_index) {
  const int64_t channels = shape.channels;
  const int64_t c = channel_index % channels;
  const int64_t base = channel_base(shape, channel_index);
  const Acc lr = static_cast<Acc>(f.lambda_re[c]), li = static_cast<Acc>(f.lambda_im[c]);
  Acc re = f.h0_re ? static_cast<Acc>(f.h0_re[channel_index]) : Acc(0);
  Acc im = f.h0_im ? static_cast<Acc>(f.h0_im[channel_index]) : Acc(0);
  for (int64_t t = 0; t < shape.length; ++t) {
    const int64_t i = base + t * channels;
    const Acc next_re = lr * re - li * im + static_cast<Acc>(f.b_re[i]);
    im = li * re + lr * im + static_cast<Acc>(f.b_im[i]);
    re = next_re;
    f.h_re[i] = static_cast<T>(re);
    f.h_im[i] = static_cast<T>(im);
  }
  if (f.last_re) f.last_re[channel_index] = static_cast<T>(re);
  if (f.last_im) f.last_im[channel_index] = static_cast<T>(im);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void complex_scan_backward_channel(const ComplexScanBackward<T>& g,
                                                         ComplexScanShape shape,
                                                         int64_t channel_index) {
  const int64_t channels = shape.channels;
  const int64_t c = channel_index % channels;
  const int64_t base = channel_base(shape, channel_index);
  const Acc lr = static_cast<Acc>(g.lambda_re[c]), li = static_cast<Acc>(g.lambda_im[c]);
  // conj(λ) · G[t+1], what step t+1 hands back to step t.
  Acc carry_re = g.grad_last_re ? static_cast<Acc>(g.grad_last_re[channel_index]) : Acc(0);
  Acc carry_im = g.grad_last_im ? static_cast<Acc>(g.grad_last_im[channel_index]) : Acc(0);
  Acc sum_re = Acc(0), sum_im = Acc(0);
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const int64_t i = base + t * channels;
    const Acc G_re = static_cast<Acc>(g.grad_h_re[i]) + carry_re;
    const Acc G_im = static_cast<Acc>(g.grad_h_im[i]) + carry_im;
    Acc prev_re = Acc(0), prev_im = Acc(0);
    if (t > 0) {
      prev_re = static_cast<Acc>(g.h_re[i - channels]);
      prev_im = static_cast<Acc>(g.h_im[i - channels]);
    } else if (g.h0_re) {
      prev_re = static_cast<Acc>(g.h0_re[channel_index]);
      prev_im = static_cast<Acc>(g.h0_im[channel_index]);
    }
    g.grad_b_re[i] = static_cast<T>(G_re);
    g.grad_b_im[i] = static_cast<T>(G_im);
    sum_re += G_re * prev_re + G_im * prev_im;
    sum_im += G_im * prev_re - G_re * prev_im;
    carry_re = lr * G_re + li * G_im;
    carry_im = lr * G_im - li * G_re;
  }
  g.grad_lambda_re[channel_index] = static_cast<T>(sum_re);
  g.grad_lambda_im[channel_index] = static_cast<T>(sum_im);
  if (g.grad_h0_re) g.grad_h0_re[channel_index] = static_cast<T>(carry_re);
  if (g.grad_h0_im) g.grad_h0_im[channel_index] = static_cast<T>(carry_im);
}

// CUDA per-thread bodies: one thread per (batch row, channel), see complex_scan_thread_channel.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void complex_scan_thread(const ComplexScanForward<T>& f,
                                               ComplexScanShape shape, int64_t block,
                                               int64_t thread, int64_t threads_per_block) {
  const int64_t channel_index =
      complex_scan_thread_channel(shape, block, thread, threads_per_block);
  if (channel_index >= 0) complex_scan_channel<T, Acc>(f, shape, channel_index);
}

template <typename T, typename Acc>
MS_HOST_DEVICE inline void complex_scan_backward_thread(const ComplexScanBackward<T>& g,
                                                        ComplexScanShape shape, int64_t block,
                                                        int64_t thread, int64_t threads_per_block) {
  const int64_t channel_index =
      complex_scan_thread_channel(shape, block, thread, threads_per_block);
  if (channel_index >= 0) complex_scan_backward_channel<T, Acc>(g, shape, channel_index);
}

// CPU: batch rows [begin, end). The channels of several rows step together
// (channel_groups.h), each evaluating the per-thread bodies' expressions in the same order.
void complex_scan_forward_cpu(const ComplexScanForward<float>& f, ComplexScanShape shape,
                              int64_t begin, int64_t end);
void complex_scan_forward_cpu(const ComplexScanForward<double>& f, ComplexScanShape shape,
                              int64_t begin, int64_t end);
void complex_scan_backward_cpu(const ComplexScanBackward<float>& g, ComplexScanShape shape,
                               int64_t begin, int64_t end);
void complex_scan_backward_cpu(const ComplexScanBackward<double>& g, ComplexScanShape shape,
                               int64_t begin, int64_t end);

// CUDA, float32 (kernels/common/cuda_device.h says what a launcher takes and returns).
MEMSCRIPT_CUDA_LAUNCHER(complex_scan_forward_cuda, const ComplexScanForward<float>&,
                        ComplexScanShape);
MEMSCRIPT_CUDA_LAUNCHER(complex_scan_backward_cuda, const ComplexScanBackward<float>&,
                        ComplexScanShape);

}  // namespace memscript::kernels
