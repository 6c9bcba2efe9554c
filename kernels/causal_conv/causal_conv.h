#pragma once

// Mamba's causal depthwise convolution and the SiLU after it, in the [batch, length, channels]
// layout the projections around it use:
//
//   u_t = silu(b + Σ_{k<K} w_k ⊙ x̄_{t+k}),  x̄ = [window (K − 1 steps), x_0 … x_{L−1}]
//
// per channel, with K the kernel size and the window the K − 1 inputs before x_0 (zeros at the
// start of a sequence, the previous chunk's last inputs when continuing one). The window after
// the sequence, x̄'s last K − 1 steps, is the next chunk's. As separate libtorch ops this was a
// concatenation, two transposes to and from Conv1d's [batch, channels, length] layout, the
// convolution's own reorders and the SiLU: passes over [batch, length, channels] arrays that
// were about a tenth of a Mamba training step. Here the channels of a step are contiguous, the
// loops over them vectorize, and a batch row is read once.
//
// The backward recomputes the convolution from x and the window:
//
//   ∂a_t = ∂u_t · silu'(a_t),  ∂x̄_p = Σ_k w_k ⊙ ∂a_{p−k} (+ ∂window_after where p ≥ L),
//   ∂w_k = Σ_t ∂a_t ⊙ x̄_{t+k},  ∂b = Σ_t ∂a_t
//
// ∂x̄'s first K − 1 steps are the window's gradient, the rest x's. The parameter gradients are
// sums over batch rows and steps: each batch row leaves one partial (its steps in order), and
// the partials are added in batch order (block_sum.h): the same bits for any thread count.
// CPU only, float32 and float64; the runtime composes Conv1d elsewhere.

#include <cstdint>

namespace memscript::kernels {

struct CausalConvShape {
  int64_t batch;
  int64_t length;
  int64_t channels;
  int64_t kernel;  // K ≥ 1; the window holds K − 1 steps
};

// Where x's numbers are: channel c of batch row n's step t at n · batch_stride + t · step_stride
// + c (x may be a slice of a wider array, as Mamba's half of its input projection is).
struct CausalConvInputLayout {
  int64_t batch_stride;
  int64_t step_stride;
};

// One batch row's parameter-gradient partial: ∂w as [K, channels] (step k's weights of every
// channel together), then ∂b [channels].
inline int64_t causal_conv_parameter_count(CausalConvShape shape) {
  return (shape.kernel + 1) * shape.channels;
}

template <typename T>
struct CausalConvWeights {
  const T* weight;  // [channels, K]: Conv1d's depthwise weight [channels, 1, K]
  const T* bias;    // [channels]
};

template <typename T>
struct CausalConvForward {
  CausalConvWeights<T> weights;
  const T* x;       // as CausalConvInputLayout says
  const T* window;  // [batch, channels, K − 1] (Conv1d's layout), or null: zeros
  T* u;             // [batch, length, channels]
  T* window_after;  // [batch, channels, K − 1]
};

template <typename T>
struct CausalConvBackward {
  CausalConvWeights<T> weights;
  const T* x;
  const T* window;
  const T* grad_u;             // [batch, length, channels]
  const T* grad_window_after;  // [batch, channels, K − 1], or null
  T* grad_x;                   // [batch, length, channels]
  T* grad_window;              // [batch, channels, K − 1], or null
  T* partials;                 // [batch, causal_conv_parameter_count(shape)]
};

// Batch rows [begin, end).
void causal_conv_forward_cpu(const CausalConvForward<float>& args, CausalConvShape shape,
                             CausalConvInputLayout layout, int64_t begin, int64_t end);
void causal_conv_forward_cpu(const CausalConvForward<double>& args, CausalConvShape shape,
                             CausalConvInputLayout layout, int64_t begin, int64_t end);
void causal_conv_backward_cpu(const CausalConvBackward<float>& args, CausalConvShape shape,
                              CausalConvInputLayout layout, int64_t begin, int64_t end);
void causal_conv_backward_cpu(const CausalConvBackward<double>& args, CausalConvShape shape,
                              CausalConvInputLayout layout, int64_t begin, int64_t end);

}  // namespace memscript::kernels
