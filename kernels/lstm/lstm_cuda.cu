// The LSTM recurrence on CUDA: one block per batch row, its state in shared memory. A step is
// two phases split by a barrier: every gate m of z = pre_t + W_hh h_{t-1} (one thread per
// gate, the sum over j in the rows' order), then every channel's cell (lstm_cell). The
// backward mirrors it: the cells' gradients (lstm_cell_backward), then W_hhᵀ grad_z into
// h_{t-1} by channel and grad_z ⊗ h_{t-1} into the row's W_hh partial by element.
#include "kernels/common/cuda_launch.cuh"
#include "kernels/lstm/lstm.h"

namespace memscript::kernels {

namespace {

constexpr int kMaxThreads = 1024;
constexpr const char* kTooLarge = "lstm: hidden size too large for the CUDA kernel's shared memory";

int threads_for(LstmShape s) {
  const int64_t warps = (s.gates() + 31) / 32;
  return static_cast<int>(warps * 32 < kMaxThreads ? warps * 32 : kMaxThreads);
}

// h, c and the gates of one row: 6 · hidden floats.
int64_t shared_bytes(LstmShape s) { return (2 * s.hidden + s.gates()) * int64_t{sizeof(float)}; }

__global__ void lstm_forward_kernel(LstmForward<float> a, LstmShape s) {
  extern __shared__ float shared[];
  const int64_t n = blockIdx.x, hidden = s.hidden, width = s.gates();
  float* h = shared;
  float* c = h + hidden;
  float* z = c + hidden;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    h[j] = a.h0 ? a.h0[n * hidden + j] : 0.0f;
    c[j] = a.c0 ? a.c0[n * hidden + j] : 0.0f;
  }
  __syncthreads();
  for (int64_t t = 0; t < s.length; ++t) {
    const int64_t row = n * s.length + t;
    for (int64_t m = threadIdx.x; m < width; m += blockDim.x) {
      float sum = a.pre[row * width + m];
      for (int64_t j = 0; j < hidden; ++j) sum += __ldg(a.weight_hh_t + j * width + m) * h[j];
      const GateActivation<float> gate =
          m / hidden == 2 ? tanh_gate<float>() : sigmoid_gate<float>();
      z[m] = activate(sum, gate);
      if (a.gates) a.gates[row * width + m] = z[m];
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      lstm_cell(z, hidden, j, c[j], h[j]);
      a.outputs[row * hidden + j] = h[j];
      if (a.cells) a.cells[row * hidden + j] = c[j];
    }
    __syncthreads();
  }
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    a.h_last[n * hidden + j] = h[j];
    a.c_last[n * hidden + j] = c[j];
  }
}

__global__ void lstm_backward_kernel(LstmBackward<float> a, LstmShape s) {
  extern __shared__ float shared[];
  const int64_t n = blockIdx.x, hidden = s.hidden, width = s.gates();
  float* carry_h = shared;
  float* carry_c = carry_h + hidden;
  float* grad_z = carry_c + hidden;
  float* grad_w = a.grad_weight_hh + n * width * hidden;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    carry_h[j] = a.grad_h_last ? a.grad_h_last[n * hidden + j] : 0.0f;
    carry_c[j] = a.grad_c_last ? a.grad_c_last[n * hidden + j] : 0.0f;
  }
  for (int64_t e = threadIdx.x; e < width * hidden; e += blockDim.x) grad_w[e] = 0.0f;
  __syncthreads();
  for (int64_t t = s.length - 1; t >= 0; --t) {
    const int64_t row = n * s.length + t;
    const float* z = a.gates + row * width;
    const float* h_prev = t > 0  ? a.outputs + (row - 1) * hidden
                          : a.h0 ? a.h0 + n * hidden
                                 : nullptr;
    const float* c_prev = t > 0 ? a.cells + (row - 1) * hidden : a.c0 ? a.c0 + n * hidden : nullptr;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float gh = a.grad_outputs[row * hidden + j] + carry_h[j];
      lstm_cell_backward(z, a.cells[row * hidden + j], c_prev ? c_prev[j] : 0.0f, gh, hidden, j,
                         grad_z, carry_c[j]);
    }
    __syncthreads();
    for (int64_t m = threadIdx.x; m < width; m += blockDim.x)
      a.grad_pre[row * width + m] = grad_z[m];
    // carry_h[j] is read above and written here by the same thread.
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
      float sum = 0.0f;
      for (int64_t m = 0; m < width; ++m) sum += __ldg(a.weight_hh + m * hidden + j) * grad_z[m];
      carry_h[j] = sum;
    }
    if (h_prev) {
      for (int64_t e = threadIdx.x; e < width * hidden; e += blockDim.x)
        grad_w[e] += grad_z[e / hidden] * h_prev[e % hidden];
    }
    __syncthreads();
  }
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    if (a.grad_h0) a.grad_h0[n * hidden + j] = carry_h[j];
    if (a.grad_c0) a.grad_c0[n * hidden + j] = carry_c[j];
  }
}

}  // namespace

bool lstm_forward_cuda(const LstmForward<float>& a, LstmShape s, void* stream,
                       const char** message) {
  if (s.hidden == 0) return true;
  return launch_kernel(lstm_forward_kernel, s.batch, threads_for(s), shared_bytes(s), stream,
                       message, kTooLarge, a, s);
}

bool lstm_backward_cuda(const LstmBackward<float>& a, LstmShape s, void* stream,
                        const char** message) {
  if (s.hidden == 0) return true;
  return launch_kernel(lstm_backward_kernel, s.batch, threads_for(s), shared_bytes(s), stream,
                       message, kTooLarge, a, s);
}

}  // namespace memscript::kernels
