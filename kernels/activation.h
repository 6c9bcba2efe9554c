#pragma once

// The pointwise activations the decoder applies after a linear layer: the MLP's GELU, DeltaNet's
// β = σ(·), linear attention's feature maps elu(·) + 1 and relu(·). Computed here rather than by
// libtorch because libtorch's CPU elu (an expm1 per element) ran at 10 ns per number on the
// development machine, most of a linear-attention training step.
//
//   gelu(x)     = x · Φ(x),  Φ(x) = (1 + erf(x / √2)) / 2,   gelu'(x) = Φ(x) + x · φ(x)
//   σ(x)        = 1 / (1 + e^−x),                            σ'     = σ · (1 − σ)
//   elu(x) + 1  = x + 1 for x > 0, e^x otherwise,            derivative 1 or e^x
//   relu(x)     = max(x, 0),                                 derivative 1 where relu(x) > 0
//
// The backward reads what the forward kept: the pre-activation for gelu and elu + 1, the output
// for σ and relu (keeps_pre_activation). The element functions are branch-free, so loops over
// them vectorize; erf in float is a rational approximation (below), in double libm's.

#include <cmath>
#include <cstdint>

#include "fast_exp.h"

namespace memscript::kernels {

enum class ActivationKind { none, gelu, sigmoid, elu_plus_one, relu };

inline bool keeps_pre_activation(ActivationKind kind) {
  return kind == ActivationKind::gelu || kind == ActivationKind::elu_plus_one;
}

// erf(x) = x · P(x²) / Q(x²) on |x| ≤ 3.92 (beyond it erf is 1 to float precision), with P and Q
// fitted for this project to the least relative error on [0, 3.92] (an iteratively reweighted
// linear least-squares fit against libm's erf). Error in float arithmetic: at most 3.5e-7
// absolute and relative, over [−6, 6] and down to 1e-30.
inline float erf_of(float x) {
  x = x < -3.92f ? -3.92f : (x > 3.92f ? 3.92f : x);
  const float u = x * x;
  float p = -1.279948231e-08f;
  p = p * u + 4.609164890e-06f;
  p = p * u + 3.767565039e-04f;
  p = p * u + 3.838627686e-03f;
  p = p * u + 5.424396757e-02f;
  p = p * u + 1.851356317e-01f;
  p = p * u + 1.128379169e+00f;
  float q = 6.239850414e-05f;
  q = q * u + 1.301522472e-03f;
  q = q * u + 1.543005073e-02f;
  q = q * u + 1.138738476e-01f;
  q = q * u + 4.974055879e-01f;
  q = q * u + 1.0f;
  return x * p / q;
}
inline double erf_of(double x) { return std::erf(x); }

template <typename T>
inline T normal_cdf(T x) {
  return T(0.5) * (T(1) + erf_of(x * T(0.70710678118654752440)));
}
template <typename T>
inline T normal_pdf(T x) {
  return T(0.39894228040143267794) * exp_of(T(-0.5) * x * x);
}

template <ActivationKind Kind, typename T>
inline T activate(T x) {
  if constexpr (Kind == ActivationKind::gelu) return x * normal_cdf(x);
  if constexpr (Kind == ActivationKind::sigmoid) return T(1) / (T(1) + exp_of(-x));
  if constexpr (Kind == ActivationKind::elu_plus_one) return x > T(0) ? x + T(1) : exp_of(x);
  if constexpr (Kind == ActivationKind::relu) return x > T(0) ? x : T(0);
  return x;
}

// dLoss/d(pre-activation) from dLoss/d(output) and the kept value (keeps_pre_activation).
template <ActivationKind Kind, typename T>
inline T activation_backward(T grad, T kept) {
  if constexpr (Kind == ActivationKind::gelu) {
    return grad * (normal_cdf(kept) + kept * normal_pdf(kept));
  }
  if constexpr (Kind == ActivationKind::sigmoid) return grad * (kept * (T(1) - kept));
  if constexpr (Kind == ActivationKind::elu_plus_one)
    return kept > T(0) ? grad : grad * exp_of(kept);
  if constexpr (Kind == ActivationKind::relu) return kept > T(0) ? grad : T(0);
  return grad;
}

// Calls body.template operator()<Kind>() with the kind as a compile-time constant, so that the
// loops inside have no switch in them.
template <typename Body>
inline void with_activation(ActivationKind kind, Body&& body) {
  switch (kind) {
    case ActivationKind::none:
      return body.template operator()<ActivationKind::none>();
    case ActivationKind::gelu:
      return body.template operator()<ActivationKind::gelu>();
    case ActivationKind::sigmoid:
      return body.template operator()<ActivationKind::sigmoid>();
    case ActivationKind::elu_plus_one:
      return body.template operator()<ActivationKind::elu_plus_one>();
    case ActivationKind::relu:
      return body.template operator()<ActivationKind::relu>();
  }
}

// y[j] = activation(pre[j]) for j < count (y may be pre).
void activation_forward_cpu(ActivationKind kind, const float* pre, float* y, int64_t count);
void activation_forward_cpu(ActivationKind kind, const double* pre, double* y, int64_t count);

// grad_pre[j] = the gradient to pre[j] from grad_y[j] and the kept value (grad_pre may be
// grad_y).
void activation_backward_cpu(ActivationKind kind, const float* grad_y, const float* kept,
                             float* grad_pre, int64_t count);
void activation_backward_cpu(ActivationKind kind, const double* grad_y, const double* kept,
                             double* grad_pre, int64_t count);

}  // namespace memscript::kernels
