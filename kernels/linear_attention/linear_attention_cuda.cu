// Linear attention on CUDA: each head a block, each row (or column) of its state a thread.
#include "kernels/common/cuda_launch.cuh"
#include "kernels/linear_attention/linear_attention.h"

namespace memscript::kernels {

namespace {

constexpr const char* kTooLarge =
    "linear attention: the head's state is too large for the CUDA kernel's shared memory";

// Linear attention, one head per block. The forward gives each column j of S a thread (z, which
// every column shares, is kept by the threads a < dk in shared memory); each sum runs in the
// CPU's order. The backward needs no barrier: thread a keeps row a of S and of G (for ∂φq_t[a]
// and ∂φk_t[a]), thread j keeps column j of G a second time (for ∂v_t[j]); the two copies of G
// add the same products in the same order.
template <typename T>
__global__ void linear_attention_forward_kernel(LinearAttentionForward<T> p) {
  using Acc = AccumulatorOf<T>;
  extern __shared__ unsigned char shared_bytes[];
  Acc* normaliser = reinterpret_cast<Acc*>(shared_bytes);
  const LinearAttentionShape& shape = p.shape;
  const int64_t head_index = blockIdx.x;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = shape.matrix_size();
  Acc* sum = p.sum_out + head_index * matrix;
  const int64_t j = threadIdx.x;
  for (int64_t a = j; a < dk; a += blockDim.x)
    normaliser[a] = p.normaliser_in ? p.normaliser_in[head_index * dk + a] : Acc(0);
  if (j < dv) {
    for (int64_t a = 0; a < dk; ++a)
      sum[a * dv + j] = p.sum_in ? p.sum_in[head_index * matrix + a * dv + j] : Acc(0);
  }
  __syncthreads();
  for (int64_t t = 0; t < shape.length; ++t) {
    const T* phi_k = p.phi_k.at(b, h, t);
    const T* phi_q = p.phi_q.at(b, h, t);
    for (int64_t a = j; a < dk; a += blockDim.x) normaliser[a] += load(phi_k[a]);
    if (j < dv) {
      const Acc value = load(p.v.at(b, h, t)[j]);
      for (int64_t a = 0; a < dk; ++a) sum[a * dv + j] += load(phi_k[a]) * value;
    }
    __syncthreads();
    Acc denominator = 0;
    for (int64_t a = 0; a < dk; ++a) denominator += normaliser[a] * load(phi_q[a]);
    denominator += p.eps;
    if (j == 0 && p.denominators) p.denominators[head_index * shape.length + t] = denominator;
    if (j < dv) {
      Acc numerator = 0;
      for (int64_t a = 0; a < dk; ++a) numerator += sum[a * dv + j] * load(phi_q[a]);
      store(numerator / denominator, p.outputs.at(b, h, t) + j);
    }
    __syncthreads();
  }
  for (int64_t a = j; a < dk; a += blockDim.x)
    p.normaliser_out[head_index * dk + a] = normaliser[a];
}

template <typename T>
__global__ void linear_attention_backward_kernel(LinearAttentionBackward<T> p) {
  using Acc = AccumulatorOf<T>;
  const LinearAttentionShape& shape = p.shape;
  const int64_t head_index = blockIdx.x;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = shape.matrix_size();
  Acc* sum = p.workspace + head_index * shape.workspace_per_head();  // S by rows [dk, dv]
  Acc* grad_sum = sum + matrix;                                      // G by rows [dk, dv]
  Acc* grad_sum_columns = grad_sum + matrix;                         // G by columns [dv, dk]
  const int64_t a = threadIdx.x, j = threadIdx.x;
  // Forward in time: row a of S and z[a], then ∂φq_t[a].
  if (a < dk) {
    Acc* row = sum + a * dv;
    Acc normaliser = p.normaliser_in ? p.normaliser_in[head_index * dk + a] : Acc(0);
    for (int64_t c = 0; c < dv; ++c)
      row[c] = p.sum_in ? p.sum_in[head_index * matrix + a * dv + c] : Acc(0);
    for (int64_t t = 0; t < shape.length; ++t) {
      const Acc key = load(p.phi_k.at(b, h, t)[a]);
      const T* v = p.v.at(b, h, t);
      normaliser += key;
      for (int64_t c = 0; c < dv; ++c) row[c] += key * load(v[c]);
      const Acc denominator = p.denominators[head_index * shape.length + t];
      const Acc grad_denominator = linear_attention_grad_denominator(p, b, h, t, denominator, dv);
      Acc recalled = 0;
      if (p.grad_outputs) {
        const T* grad_out = p.grad_outputs.at(b, h, t);
        for (int64_t c = 0; c < dv; ++c) recalled += row[c] * load(grad_out[c]);
      }
      store(recalled / denominator + normaliser * grad_denominator, p.grad_phi_q.at(b, h, t) + a);
    }
  }
  // Backward in time: row a of G and g[a] give ∂φk_t[a]; column j of G gives ∂v_t[j].
  Acc* row = grad_sum + a * dv;
  Acc* column = grad_sum_columns + j * dk;
  Acc grad_normaliser = 0;
  if (a < dk) {
    grad_normaliser = p.grad_normaliser_out ? p.grad_normaliser_out[head_index * dk + a] : Acc(0);
    for (int64_t c = 0; c < dv; ++c)
      row[c] = p.grad_sum_out ? p.grad_sum_out[head_index * matrix + a * dv + c] : Acc(0);
  }
  if (j < dv) {
    for (int64_t r = 0; r < dk; ++r)
      column[r] = p.grad_sum_out ? p.grad_sum_out[head_index * matrix + r * dv + j] : Acc(0);
  }
  for (int64_t t = shape.length - 1; t >= 0; --t) {
    const Acc denominator = p.denominators[head_index * shape.length + t];
    const T* phi_q = p.phi_q.at(b, h, t);
    const T* phi_k = p.phi_k.at(b, h, t);
    const T* grad_out = p.grad_outputs ? p.grad_outputs.at(b, h, t) : nullptr;
    if (a < dk) {
      const Acc grad_denominator = linear_attention_grad_denominator(p, b, h, t, denominator, dv);
      const Acc query = load(phi_q[a]);
      if (grad_out) {
        for (int64_t c = 0; c < dv; ++c) row[c] += query * (load(grad_out[c]) / denominator);
      }
      grad_normaliser += query * grad_denominator;
      const T* v = p.v.at(b, h, t);
      Acc grad_key = 0;
      for (int64_t c = 0; c < dv; ++c) grad_key += row[c] * load(v[c]);
      store(grad_key + grad_normaliser, p.grad_phi_k.at(b, h, t) + a);
    }
    if (j < dv) {
      if (grad_out) {
        const Acc grad_numerator = load(grad_out[j]) / denominator;
        for (int64_t r = 0; r < dk; ++r) column[r] += load(phi_q[r]) * grad_numerator;
      }
      Acc grad_value = 0;
      for (int64_t r = 0; r < dk; ++r) grad_value += column[r] * load(phi_k[r]);
      store(grad_value, p.grad_v.at(b, h, t) + j);
    }
  }
  if (a < dk) {
    if (p.grad_sum_in) {
      for (int64_t c = 0; c < dv; ++c) p.grad_sum_in[head_index * matrix + a * dv + c] = row[c];
    }
    if (p.grad_normaliser_in) p.grad_normaliser_in[head_index * dk + a] = grad_normaliser;
  }
}

// The kernels give a thread to each row and each column of a head's state (no loop over more).
bool linear_attention_fits(const LinearAttentionShape& shape, const char** message) {
  if (shape.key_dim <= 1024 && shape.value_dim <= 1024) return true;
  if (message) *message = "linear attention: head sizes above 1024 have no CUDA kernel";
  return false;
}

template <typename T>
bool linear_attention_forward(const LinearAttentionForward<T>& p, void* stream,
                              const char** message) {
  if (!linear_attention_fits(p.shape, message)) return false;
  return launch_kernel(linear_attention_forward_kernel<T>, p.shape.head_count(),
                       head_threads(p.shape.key_dim, p.shape.value_dim),
                       p.shape.key_dim * int64_t{sizeof(AccumulatorOf<T>)}, stream, message,
                       kTooLarge, p);
}

template <typename T>
bool linear_attention_backward(const LinearAttentionBackward<T>& p, void* stream,
                               const char** message) {
  if (!linear_attention_fits(p.shape, message)) return false;
  return launch_kernel(linear_attention_backward_kernel<T>, p.shape.head_count(),
                       head_threads(p.shape.key_dim, p.shape.value_dim), 0, stream, message,
                       kTooLarge, p);
}

}  // namespace

bool linear_attention_forward_cuda(const LinearAttentionForward<float>& p, void* stream,
                                   const char** message) {
  return linear_attention_forward(p, stream, message);
}
bool linear_attention_forward_cuda(const LinearAttentionForward<Bf16>& p, void* stream,
                                   const char** message) {
  return linear_attention_forward(p, stream, message);
}
bool linear_attention_backward_cuda(const LinearAttentionBackward<float>& p, void* stream,
                                    const char** message) {
  return linear_attention_backward(p, stream, message);
}
bool linear_attention_backward_cuda(const LinearAttentionBackward<Bf16>& p, void* stream,
                                    const char** message) {
  return linear_attention_backward(p, stream, message);
}

}  // namespace memscript::kernels
