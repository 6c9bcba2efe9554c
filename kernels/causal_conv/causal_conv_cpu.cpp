#include <algorithm>
#include <vector>

#include "kernels/causal_conv/causal_conv.h"
#include "kernels/common/activation.h"

namespace memscript::kernels {

namespace {

// The weights as [K, channels]: tap k of every channel together, so that the loops over
// channels read them contiguously.
template <typename T>
std::vector<T> taps_of(const T* weight, const CausalConvShape& s) {
  std::vector<T> taps(static_cast<size_t>(s.kernel * s.channels));
  for (int64_t c = 0; c < s.channels; ++c) {
    for (int64_t k = 0; k < s.kernel; ++k) taps[k * s.channels + c] = weight[c * s.kernel + k];
  }
  return taps;
}

// Windows are in Conv1d's layout [batch, channels, K − 1]: step j of batch row n's window is
// every channel's number j, at a stride of K − 1. These copy one step to or from a contiguous
// [channels] row.
template <typename T>
void load_window_step(const T* window, const CausalConvShape& s, int64_t n, int64_t j, T* step) {
  const int64_t keep = s.kernel - 1;
  const T* rows = window + n * s.channels * keep + j;
  for (int64_t c = 0; c < s.channels; ++c) step[c] = rows[c * keep];
}
template <typename T>
void store_window_step(const T* step, const CausalConvShape& s, int64_t n, int64_t j, T* window) {
  const int64_t keep = s.kernel - 1;
  T* rows = window + n * s.channels * keep + j;
  for (int64_t c = 0; c < s.channels; ++c) rows[c * keep] = step[c];
}

// x̄ of one batch row: the window's K − 1 steps (copied into step-major rows, as x's are), then
// x's steps where they are.
template <typename T>
class PaddedRow {
 public:
  PaddedRow(const CausalConvShape& s, CausalConvInputLayout layout, const T* x, const T* window,
            int64_t n)
      : channels_(s.channels),
        keep_(s.kernel - 1),
        step_stride_(layout.step_stride),
        x_(x + n * layout.batch_stride),
        head_(static_cast<size_t>(keep_ * channels_), T(0)) {
    if (!window) return;
    for (int64_t j = 0; j < keep_; ++j)
      load_window_step(window, s, n, j, head_.data() + j * channels_);
  }

  const T* step(int64_t p) const {
    return p < keep_ ? head_.data() + p * channels_ : x_ + (p - keep_) * step_stride_;
  }

 private:
  int64_t channels_;
  int64_t keep_;
  int64_t step_stride_;
  const T* x_;
  std::vector<T> head_;
};

// acc += a ⊙ b over the channels. The arrays come in as restrict parameters: only so does GCC
// vectorize the loop (restrict locals it does not trust).
template <typename T>
void add_product(int64_t channels, const T* __restrict a, const T* __restrict b,
                 T* __restrict acc) {
  for (int64_t c = 0; c < channels; ++c) acc[c] += a[c] * b[c];
}

// a = b + Σ_k w_k ⊙ x̄_{t+k}: the convolution at step t, before the SiLU.
template <typename T>
void convolve_step(const T* bias, const std::vector<T>& taps, const PaddedRow<T>& row, int64_t t,
                   const CausalConvShape& s, T* a) {
  std::copy(bias, bias + s.channels, a);
  for (int64_t k = 0; k < s.kernel; ++k) {
    add_product(s.channels, taps.data() + k * s.channels, row.step(t + k), a);
  }
}

template <typename T>
void forward_row(const CausalConvForward<T>& f, const CausalConvShape& s,
                 CausalConvInputLayout layout, const std::vector<T>& taps, int64_t n) {
  const PaddedRow<T> row(s, layout, f.x, f.window, n);
  for (int64_t t = 0; t < s.length; ++t) {
    T* u = f.u + (n * s.length + t) * s.channels;
    convolve_step(f.weights.bias, taps, row, t, s, u);
    activate_all<ActivationKind::silu>(u, u, s.channels);
  }
  // The window after the sequence: x̄'s last K − 1 steps.
  for (int64_t j = 0; j < s.kernel - 1; ++j) {
    store_window_step(row.step(s.length + j), s, n, j, f.window_after);
  }
}

// ∂a_t = ∂u_t · silu'(a_t) for the steps t of the last K, kept in a ring.
template <typename T>
class RecentGrads {
 public:
  explicit RecentGrads(const CausalConvShape& s)
      : kernel_(s.kernel), channels_(s.channels), ring_(static_cast<size_t>(kernel_ * channels_)) {}

  T* at(int64_t t) { return ring_.data() + (t % kernel_) * channels_; }
  const T* at(int64_t t) const { return ring_.data() + (t % kernel_) * channels_; }

 private:
  int64_t kernel_;
  int64_t channels_;
  std::vector<T> ring_;
};

// Step t's ∂a into `recent`, and its share of the row's parameter-gradient partial.
template <typename T>
void backward_step(const CausalConvBackward<T>& b, const CausalConvShape& s,
                   const std::vector<T>& taps, const PaddedRow<T>& row, int64_t n, int64_t t,
                   T* __restrict a, RecentGrads<T>& recent, T* __restrict partial) {
  convolve_step(b.weights.bias, taps, row, t, s, a);
  const T* __restrict grad_u = b.grad_u + (n * s.length + t) * s.channels;
  T* __restrict grad_a = recent.at(t);
  for (int64_t c = 0; c < s.channels; ++c) {
    grad_a[c] = activation_backward<ActivationKind::silu>(grad_u[c], a[c]);
  }
  for (int64_t k = 0; k < s.kernel; ++k) {
    add_product(s.channels, grad_a, row.step(t + k), partial + k * s.channels);
  }
  T* __restrict grad_bias = partial + s.kernel * s.channels;
  for (int64_t c = 0; c < s.channels; ++c) grad_bias[c] += grad_a[c];
}

// ∂x̄_p = ∂window_after (where p ≥ L) + Σ_k w_k ⊙ ∂a_{p−k} over the steps p − k of the sequence.
template <typename T>
void padded_grad(const CausalConvBackward<T>& b, const CausalConvShape& s,
                 const std::vector<T>& taps, const RecentGrads<T>& recent, int64_t n, int64_t p,
                 T* __restrict grad) {
  if (p >= s.length && b.grad_window_after) {
    load_window_step(b.grad_window_after, s, n, p - s.length, grad);
  } else {
    std::fill(grad, grad + s.channels, T(0));
  }
  for (int64_t k = 0; k < s.kernel; ++k) {
    const int64_t t = p - k;
    if (t >= 0 && t < s.length)
      add_product(s.channels, taps.data() + k * s.channels, recent.at(t), grad);
  }
}

template <typename T>
void backward_row(const CausalConvBackward<T>& b, const CausalConvShape& s,
                  CausalConvInputLayout layout, const std::vector<T>& taps, int64_t n) {
  const int64_t keep = s.kernel - 1;
  const PaddedRow<T> row(s, layout, b.x, b.window, n);
  RecentGrads<T> recent(s);
  std::vector<T> a(static_cast<size_t>(s.channels)), window_grad(a.size());
  const int64_t count = causal_conv_parameter_count(s);
  T* partial = b.partials + n * count;
  std::fill(partial, partial + count, T(0));
  // x̄_p's gradient needs ∂a of steps p − K + 1 … p: it is complete once step p is done.
  for (int64_t p = 0; p < s.length + keep; ++p) {
    if (p < s.length) backward_step(b, s, taps, row, n, p, a.data(), recent, partial);
    if (p >= keep) {
      padded_grad(b, s, taps, recent, n, p, b.grad_x + (n * s.length + p - keep) * s.channels);
    } else if (b.grad_window) {
      padded_grad(b, s, taps, recent, n, p, window_grad.data());
      store_window_step(window_grad.data(), s, n, p, b.grad_window);
    }
  }
}

template <typename T>
void forward_rows(const CausalConvForward<T>& f, const CausalConvShape& s,
                  CausalConvInputLayout layout, int64_t begin, int64_t end) {
  const std::vector<T> taps = taps_of(f.weights.weight, s);
  for (int64_t n = begin; n < end; ++n) forward_row(f, s, layout, taps, n);
}

template <typename T>
void backward_rows(const CausalConvBackward<T>& b, const CausalConvShape& s,
                   CausalConvInputLayout layout, int64_t begin, int64_t end) {
  const std::vector<T> taps = taps_of(b.weights.weight, s);
  for (int64_t n = begin; n < end; ++n) backward_row(b, s, layout, taps, n);
}

}  // namespace

void causal_conv_forward_cpu(const CausalConvForward<float>& args, CausalConvShape shape,
                             CausalConvInputLayout layout, int64_t begin, int64_t end) {
  forward_rows(args, shape, layout, begin, end);
}
void causal_conv_forward_cpu(const CausalConvForward<double>& args, CausalConvShape shape,
                             CausalConvInputLayout layout, int64_t begin, int64_t end) {
  forward_rows(args, shape, layout, begin, end);
}
void causal_conv_backward_cpu(const CausalConvBackward<float>& args, CausalConvShape shape,
                              CausalConvInputLayout layout, int64_t begin, int64_t end) {
  backward_rows(args, shape, layout, begin, end);
}
void causal_conv_backward_cpu(const CausalConvBackward<double>& args, CausalConvShape shape,
                              CausalConvInputLayout layout, int64_t begin, int64_t end) {
  backward_rows(args, shape, layout, begin, end);
}

}  // namespace memscript::kernels
