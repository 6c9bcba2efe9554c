#pragma once

// Diagonal linear scan, the recurrence under qLSTM, LRU and Mamba:
//   h[n, t, c] = a[n, t, c] * h[n, t-1, c] + b[n, t, c],   h[n, -1, c] = h0[n, c]
// Tensors are contiguous [batch, length, channels]; the state h0 / h_last is [batch, channels].
// Every (n, c) pair is an independent channel, which is what the CPU loop and the CUDA
// threads split between them.

#include <cstdint>

#include "host_device.h"

namespace memscript::kernels {

struct DiagScanShape {
  int64_t batch;
  int64_t length;
  int64_t channels;
};

// Runs one channel through all time steps. State is kept in the accumulation type Acc so
// that bf16 inputs on the GPU still carry a float32 state.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void diag_scan_channel(const T* a, const T* b, const T* h0, T* h, T* h_last,
                                             DiagScanShape shape, int64_t channel_index) {
  const int64_t n = channel_index / shape.channels;
  const int64_t c = channel_index % shape.channels;
  const int64_t base = n * shape.length * shape.channels + c;
  Acc state = h0 ? static_cast<Acc>(h0[channel_index]) : Acc(0);
  for (int64_t t = 0; t < shape.length; ++t) {
    const int64_t i = base + t * shape.channels;
    state = static_cast<Acc>(a[i]) * state + static_cast<Acc>(b[i]);
    h[i] = static_cast<T>(state);
  }
  if (h_last) h_last[n * shape.channels + c] = static_cast<T>(state);
}

// The CUDA kernel's per-thread body: which channel a (block, thread) pair owns. Kept here so
// the tests can run it on the CPU by looping over blocks x threads.
template <typename T, typename Acc>
MS_HOST_DEVICE inline void diag_scan_thread(const T* a, const T* b, const T* h0, T* h, T* h_last,
                                            DiagScanShape shape, int64_t block, int64_t thread,
                                            int64_t threads_per_block) {
  const int64_t channel_index = block * threads_per_block + thread;
  if (channel_index >= shape.batch * shape.channels) return;
  diag_scan_channel<T, Acc>(a, b, h0, h, h_last, shape, channel_index);
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

// CUDA: device pointers, launched on `stream` (a cudaStream_t). Returns false when this build
// has no CUDA kernels or the launch failed; the message then says why.
bool diag_scan_forward_cuda(const float* a, const float* b, const float* h0, float* h,
                            float* h_last, DiagScanShape shape, void* stream, const char** message);

bool cuda_kernels_compiled();
// GPUs the CUDA runtime sees (0 without CUDA kernels or without a GPU).
int cuda_device_count();

}  // namespace memscript::kernels
