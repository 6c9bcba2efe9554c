// The delta rule on CUDA. The forward hands blockIdx / threadIdx to the per-row body in
// delta_rule.h; the backward gives each head a block and runs delta_rule.h's block phases.
#include "kernels/common/cuda_launch.cuh"
#include "kernels/delta_rule/delta_rule.h"

namespace memscript::kernels {

namespace {

constexpr const char* kTooLarge =
    "delta rule: the head's state is too large for the CUDA kernel's shared memory";

template <bool Erase, bool KeyDecay, typename T, int64_t KeyDim>
__global__ void delta_rule_forward_kernel(DeltaRuleForward<T> p) {
  delta_rule_forward_thread<Erase, KeyDecay, T, KeyDim>(p, blockIdx.x, threadIdx.x, blockDim.x);
}

// The backward of one head per block: the phases in delta_rule.h between the barriers that
// hand the rows' terms to the column sums and back.
template <bool Erase, bool KeyDecay, typename T>
__global__ void delta_rule_backward_kernel(DeltaRuleBackward<T> p) {
  using Acc = AccumulatorOf<T>;
  extern __shared__ unsigned char shared_bytes[];
  Acc* shared = reinterpret_cast<Acc*>(shared_bytes);
  const DeltaRuleShape& shape = p.shape;
  const int64_t head = blockIdx.x, thread = threadIdx.x, threads = blockDim.x;
  delta_rule_block_start(p, head, thread, threads);
  __syncthreads();
  for (int64_t segment = shape.checkpoint_count() - 1; segment >= 0; --segment) {
    const int64_t start = segment * shape.checkpoint_every, end = shape.segment_end(start);
    // A thread's rows are its own from here to the column sums: no barrier before them.
    delta_rule_block_recompute<Erase, KeyDecay>(p, head, segment, thread, threads);
    for (int64_t t = end - 1; t >= start; --t) {
      delta_rule_block_rows<Erase, KeyDecay>(p, head, start, t, thread, threads, shared);
      __syncthreads();
      delta_rule_block_columns<KeyDecay>(p, head, t, thread, threads, shared);
      __syncthreads();
    }
  }
  delta_rule_block_finish(p, head, thread, threads);
}

// The kernels compiled for the shape's update and decay (and the forward's key size).
template <bool Erase, bool KeyDecay, typename T>
auto forward_kernel_of_size(int64_t key_dim) -> void (*)(DeltaRuleForward<T>) {
  return with_fixed_dim(key_dim, [](auto size) {
    return delta_rule_forward_kernel<Erase, KeyDecay, T, decltype(size)::value>;
  });
}

template <typename T>
auto forward_kernel(const DeltaRuleShape& shape) -> void (*)(DeltaRuleForward<T>) {
  if (shape.key_decay) {
    return shape.erase ? forward_kernel_of_size<true, true, T>(shape.key_dim)
                       : forward_kernel_of_size<false, true, T>(shape.key_dim);
  }
  return shape.erase ? forward_kernel_of_size<true, false, T>(shape.key_dim)
                     : forward_kernel_of_size<false, false, T>(shape.key_dim);
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
  const int64_t shared =
      DeltaRuleBlockShared(shape).size(shape) * int64_t{sizeof(AccumulatorOf<T>)};
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
