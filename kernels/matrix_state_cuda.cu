// The CUDA kernels of the matrix-state recurrences (delta rule, linear attention). The delta
// rule's forward hands blockIdx / threadIdx to the per-row body in delta_rule.h; the other
// kernels give each head a block and each row (or column) of its state a thread.
#include "cuda_launch.cuh"
#include "delta_rule.h"
#include "linear_attention.h"

namespace memscript::kernels {

namespace {

template <typename T>
__global__ void delta_rule_forward_kernel(DeltaRuleForward<T> p) {
  delta_rule_forward_thread(p, blockIdx.x, threadIdx.x, blockDim.x);
}

// The backward of one head per block, one row of S per thread (delta_rule_backward_token's
// arithmetic spread over rows). Rows recompute their own states (a row's step needs no other
// row); the sums over rows into ∂q_t, ∂k_t, ∂β_t, ∂α_t go through shared memory, each added in
// row order 0, 1, … by one thread, so the result does not depend on the block size.
template <typename T>
__global__ void delta_rule_backward_kernel(DeltaRuleBackward<T> p) {
  using Acc = AccumulatorOf<T>;
  extern __shared__ unsigned char shared_bytes[];
  const DeltaRuleShape& shape = p.shape;
  const int64_t head_index = blockIdx.x;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = dk * dv;
  const int64_t every = shape.checkpoint_every;
  Acc* ds = p.workspace + head_index * shape.workspace_per_head();
  Acc* states = ds + matrix;
  // Per row: its terms of ∂q_t [dk] and ∂k_t [dk], of ∂β_t and of ∂α_t.
  Acc* row_grad_q = reinterpret_cast<Acc*>(shared_bytes);
  Acc* row_grad_k = row_grad_q + matrix;
  Acc* row_grad_beta = row_grad_k + matrix;
  Acc* row_grad_alpha = row_grad_beta + dv;
  for (int64_t n = threadIdx.x; n < matrix; n += blockDim.x)
    ds[n] = p.grad_state_out ? p.grad_state_out[head_index * matrix + n] : Acc(0);
  __syncthreads();
  for (int64_t segment = shape.checkpoint_count() - 1; segment >= 0; --segment) {
    const int64_t start = segment * every;
    const int64_t end = start + every < shape.length ? start + every : shape.length;
    const Acc* checkpoint =
        p.checkpoints + (head_index * shape.checkpoint_count() + segment) * matrix;
    for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) {
      for (int64_t j = 0; j < dk; ++j) states[i * dk + j] = checkpoint[i * dk + j];
      for (int64_t t = start; t < end; ++t) {
        Acc* next = states + (t - start + 1) * matrix + i * dk;
        for (int64_t j = 0; j < dk; ++j) next[j] = next[j - matrix];
        delta_rule_row_step(next, p.k.at(b, h, t), load(p.v.at(b, h, t)[i]),
                            load(*p.beta.at(b, h, t)), load_decay(p.alpha, b, h, t), dk);
      }
    }
    for (int64_t t = end - 1; t >= start; --t) {
      const T* q = p.q.at(b, h, t);
      const T* k = p.k.at(b, h, t);
      const Acc beta = load(*p.beta.at(b, h, t)), alpha = load_decay(p.alpha, b, h, t);
      for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) {
        Acc* dsi = ds + i * dk;
        const Acc* before = states + (t - start) * matrix + i * dk;
        const Acc* after = before + matrix;
        const Acc grad_output = p.grad_outputs ? load(p.grad_outputs.at(b, h, t)[i]) : Acc(0);
        Acc recalled = 0, ds_k = 0;
        for (int64_t j = 0; j < dk; ++j) {
          dsi[j] += grad_output * load(q[j]);
          row_grad_q[i * dk + j] = grad_output * after[j];
          recalled += (alpha * before[j]) * load(k[j]);
          ds_k += dsi[j] * load(k[j]);
        }
        const Acc error = load(p.v.at(b, h, t)[i]) - recalled;
        const Acc grad_error = beta * ds_k;
        row_grad_beta[i] = ds_k * error;
        store(grad_error, p.grad_v.at(b, h, t) + i);
        Acc grad_alpha = 0;
        for (int64_t j = 0; j < dk; ++j) {
          row_grad_k[i * dk + j] = beta * error * dsi[j] - grad_error * (alpha * before[j]);
          const Acc grad_decayed = dsi[j] - grad_error * load(k[j]);
          grad_alpha += grad_decayed * before[j];
          dsi[j] = alpha * grad_decayed;
        }
        row_grad_alpha[i] = grad_alpha;
      }
      __syncthreads();
      for (int64_t j = threadIdx.x; j < dk; j += blockDim.x) {
        Acc grad_q = 0, grad_k = 0;
        for (int64_t i = 0; i < dv; ++i) {
          grad_q += row_grad_q[i * dk + j];
          grad_k += row_grad_k[i * dk + j];
        }
        store(grad_q, p.grad_q.at(b, h, t) + j);
        store(grad_k, p.grad_k.at(b, h, t) + j);
      }
      if (threadIdx.x == 0) {
        Acc grad_beta = 0, grad_alpha = 0;
        for (int64_t i = 0; i < dv; ++i) {
          grad_beta += row_grad_beta[i];
          grad_alpha += row_grad_alpha[i];
        }
        store(grad_beta, p.grad_beta.at(b, h, t));
        if (p.grad_alpha) store(grad_alpha, p.grad_alpha.at(b, h, t));
      }
      __syncthreads();
    }
  }
  if (p.grad_state_in) {
    for (int64_t n = threadIdx.x; n < matrix; n += blockDim.x)
      p.grad_state_in[head_index * matrix + n] = ds[n];
  }
}

// One thread per row and per column of a head's state (the delta rule's backward: its rows,
// and the columns its sums run over): whole warps, at most 1024.
int64_t head_threads(int64_t key_dim, int64_t value_dim) {
  const int64_t widest = value_dim > key_dim ? value_dim : key_dim;
  const int64_t threads = (widest + 31) / 32 * 32;
  return threads < 1024 ? threads : 1024;
}

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

template <typename Params>
bool launch(void (*kernel)(Params), const Params& p, int64_t blocks, int64_t threads, void* stream,
            const char** message, int64_t shared = 0) {
  if (blocks == 0) return true;
  if (shared > 48 * 1024) {
    // Beyond 48 KiB a kernel must opt in, up to what the device allows.
    int device = 0, limit = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (shared > limit || cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shared)) != cudaSuccess) {
      if (message) *message = "the head's state is too large for the kernel's shared memory";
      return false;
    }
  }
  kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads),
           static_cast<size_t>(shared), cuda_stream(stream)>>>(p);
  return cuda_launch_succeeded(message);
}

template <typename T>
bool delta_rule_forward(const DeltaRuleForward<T>& p, void* stream, const char** message) {
  return launch(delta_rule_forward_kernel<T>, p, delta_rule_blocks(p.shape.row_count()),
                kDeltaRuleThreadsPerBlock, stream, message);
}

template <typename T>
bool delta_rule_backward(const DeltaRuleBackward<T>& p, void* stream, const char** message) {
  const DeltaRuleShape& shape = p.shape;
  const int64_t shared =
      (2 * shape.matrix_size() + 2 * shape.value_dim) * int64_t{sizeof(AccumulatorOf<T>)};
  return launch(delta_rule_backward_kernel<T>, p, shape.head_count(),
                head_threads(shape.key_dim, shape.value_dim), stream, message, shared);
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
  return launch(linear_attention_forward_kernel<T>, p, p.shape.head_count(),
                head_threads(p.shape.key_dim, p.shape.value_dim), stream, message,
                p.shape.key_dim * int64_t{sizeof(AccumulatorOf<T>)});
}

template <typename T>
bool linear_attention_backward(const LinearAttentionBackward<T>& p, void* stream,
                               const char** message) {
  if (!linear_attention_fits(p.shape, message)) return false;
  return launch(linear_attention_backward_kernel<T>, p, p.shape.head_count(),
                head_threads(p.shape.key_dim, p.shape.value_dim), stream, message);
}

}  // namespace

bool delta_rule_forward_cuda(const DeltaRuleForward<float>& p, void* stream, const char** message) {
  return delta_rule_forward(p, stream, message);
}
bool delta_rule_forward_cuda(const DeltaRuleForward<Bf16>& p, void* stream, const char** message) {
  return delta_rule_forward(p, stream, message);
}
bool delta_rule_backward_cuda(const DeltaRuleBackward<float>& p, void* stream,
                              const char** message) {
  return delta_rule_backward(p, stream, message);
}
bool delta_rule_backward_cuda(const DeltaRuleBackward<Bf16>& p, void* stream,
                              const char** message) {
  return delta_rule_backward(p, stream, message);
}

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
