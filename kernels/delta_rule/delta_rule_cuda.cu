// The delta rule on CUDA. The forward hands blockIdx / threadIdx to the per-row body in
// delta_rule.h; the backward gives each head a block and each row of its state a thread.
#include "kernels/common/cuda_launch.cuh"
#include "kernels/delta_rule/delta_rule.h"

namespace memscript::kernels {

namespace {

constexpr const char* kTooLarge =
    "delta rule: the head's state is too large for the CUDA kernel's shared memory";

template <bool Erase, bool KeyDecay, typename T>
__global__ void delta_rule_forward_kernel(DeltaRuleForward<T> p) {
  delta_rule_forward_thread<Erase, KeyDecay>(p, blockIdx.x, threadIdx.x, blockDim.x);
}

// The backward of one head per block, one row of S per thread (delta_rule_row_backward on each
// row). Rows recompute their own states (a row's step needs no other
// row); the sums over rows into ∂q_t, ∂k_t, ∂β_t, ∂α_t go through shared memory, each added in
// row order 0, 1, … by one thread, so the result does not depend on the block size.
template <bool Erase, bool KeyDecay, typename T>
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
  // Per row: its terms of ∂q_t [dk] and ∂k_t [dk], of ∂β_t and of ∂α_t ([dk] with KeyDecay).
  const int64_t decay_width = KeyDecay ? dk : 1;
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
        delta_rule_row_step<Erase>(next, LoadedRow<T>{p.k.at(b, h, t)}, load(p.v.at(b, h, t)[i]),
                                   load(*p.beta.at(b, h, t)), decay_at<KeyDecay>(p.alpha, b, h, t),
                                   dk);
      }
    }
    for (int64_t t = end - 1; t >= start; --t) {
      const LoadedRow<T> q{p.q.at(b, h, t)}, k{p.k.at(b, h, t)};
      const Acc beta = load(*p.beta.at(b, h, t));
      const auto alpha = decay_at<KeyDecay>(p.alpha, b, h, t);
      for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) {
        const Acc* before = states + (t - start) * matrix + i * dk;
        const Acc grad_output = p.grad_outputs ? load(p.grad_outputs.at(b, h, t)[i]) : Acc(0);
        for (int64_t j = 0; j < dk; ++j) row_grad_q[i * dk + j] = row_grad_k[i * dk + j] = 0;
        for (int64_t j = 0; j < decay_width; ++j) row_grad_alpha[i * decay_width + j] = 0;
        row_grad_beta[i] = 0;
        Acc grad_v;
        if constexpr (KeyDecay) {
          grad_v = delta_rule_row_backward<Erase>(
              ds + i * dk, before, before + matrix, q, k, load(p.v.at(b, h, t)[i]), grad_output,
              beta, alpha, dk, row_grad_q + i * dk, row_grad_k + i * dk, row_grad_beta[i],
              KeyDecayGrad<Acc>{row_grad_alpha + i * dk});
        } else {
          grad_v = delta_rule_row_backward<Erase>(
              ds + i * dk, before, before + matrix, q, k, load(p.v.at(b, h, t)[i]), grad_output,
              beta, alpha, dk, row_grad_q + i * dk, row_grad_k + i * dk, row_grad_beta[i],
              UniformDecayGrad<Acc>{row_grad_alpha[i]});
        }
        store(grad_v, p.grad_v.at(b, h, t) + i);
      }
      __syncthreads();
      for (int64_t j = threadIdx.x; j < dk; j += blockDim.x) {
        Acc grad_q = 0, grad_k = 0, grad_alpha = 0;
        for (int64_t i = 0; i < dv; ++i) {
          grad_q += row_grad_q[i * dk + j];
          grad_k += row_grad_k[i * dk + j];
          if (KeyDecay) grad_alpha += row_grad_alpha[i * dk + j];
        }
        store(grad_q, p.grad_q.at(b, h, t) + j);
        store(grad_k, p.grad_k.at(b, h, t) + j);
        if (KeyDecay) store(grad_alpha, p.grad_alpha.at(b, h, t) + j);
      }
      if (threadIdx.x == 0) {
        Acc grad_beta = 0, grad_alpha = 0;
        for (int64_t i = 0; i < dv; ++i) {
          grad_beta += row_grad_beta[i];
          if (!KeyDecay) grad_alpha += row_grad_alpha[i];
        }
        store(grad_beta, p.grad_beta.at(b, h, t));
        if (!KeyDecay && p.grad_alpha) store(grad_alpha, p.grad_alpha.at(b, h, t));
      }
      __syncthreads();
    }
  }
  if (p.grad_state_in) {
    for (int64_t n = threadIdx.x; n < matrix; n += blockDim.x)
      p.grad_state_in[head_index * matrix + n] = ds[n];
  }
}

// The kernels compiled for the shape's update and decay.
template <typename T>
auto forward_kernel(const DeltaRuleShape& shape) -> void (*)(DeltaRuleForward<T>) {
  if (shape.key_decay) {
    return shape.erase ? delta_rule_forward_kernel<true, true, T>
                       : delta_rule_forward_kernel<false, true, T>;
  }
  return shape.erase ? delta_rule_forward_kernel<true, false, T>
                     : delta_rule_forward_kernel<false, false, T>;
}

template <typename T>
auto backward_kernel(const DeltaRuleShape& shape) -> void (*)(DeltaRuleBackward<T>) {
  if (shape.key_decay) {
    return shape.erase ? delta_rule_backward_kernel<true, true, T>
                       : delta_rule_backward_kernel<false, true, T>;
  }
  return shape.erase ? delta_rule_backward_kernel<true, false, T>
                     : delta_rule_backward_kernel<false, false, T>;
}

template <typename T>
bool delta_rule_forward(const DeltaRuleForward<T>& p, void* stream, const char** message) {
  return launch_kernel(forward_kernel<T>(p.shape), delta_rule_blocks(p.shape.row_count()),
                       kDeltaRuleThreadsPerBlock, 0, stream, message, kTooLarge, p);
}

template <typename T>
bool delta_rule_backward(const DeltaRuleBackward<T>& p, void* stream, const char** message) {
  const DeltaRuleShape& shape = p.shape;
  // Each row's terms of ∂q_t, ∂k_t, ∂β_t and ∂α_t.
  const int64_t shared = (2 * shape.matrix_size() + shape.value_dim * (1 + shape.decay_width())) *
                         int64_t{sizeof(AccumulatorOf<T>)};
  return launch_kernel(backward_kernel<T>(shape), shape.head_count(),
                       head_threads(shape.key_dim, shape.value_dim), shared, stream, message,
                       kTooLarge, p);
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

}  // namespace memscript::kernels
