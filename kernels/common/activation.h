#pragma once

// The pointwise activations the decoder applies after a linear layer: the MLP's GELU, DeltaNet's
// β = σ(·), linear attention's feature maps elu(·) + 1 and relu(·), gated DeltaNet's and
// Mamba's step sizes softplus(·), Mamba's SiLU. Computed here rather than by libtorch because
// libtorch's CPU elu and softplus (an expm1 or log1p per element) ran at about 10 ns per number
// on the development machine, most of a linear-attention training step.
//
//   gelu(x)     = x · Φ(x),  Φ(x) = (1 + erf(x / √2)) / 2,   gelu'(x) = Φ(x) + x · φ(x)
//   σ(x)        = 1 / (1 + e^−x),                            σ'     = σ · (1 − σ)
//   elu(x) + 1  = x + 1 for x > 0, e^x otherwise,            derivative 1 or e^x
//   relu(x)     = max(x, 0),                                 derivative 1 where relu(x) > 0
//   softplus(x) = log(1 + e^x), x above 20 as is (torch's),  derivative σ(x) (1 above 20)
//   silu(x)     = x · σ(x),                                  silu'(x) = σ(x) (1 + x (1 − σ(x)))
//
// The backward reads what the forward kept: the pre-activation for gelu, elu + 1, softplus and
// silu, the output for σ and relu (keeps_pre_activation). The element functions are
// branch-free, so loops over them vectorize; erf and log in float are approximations written
// here (below), in double libm's.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/fast_exp.h"

namespace memscript::kernels {

enum class ActivationKind { none, gelu, sigmoid, elu_plus_one, relu, softplus, silu };

inline bool keeps_pre_activation(ActivationKind kind) {
  return kind == ActivationKind::gelu || kind == ActivationKind::elu_plus_one ||
         kind == ActivationKind::softplus || kind == ActivationKind::silu;
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

// log(x) for a positive normal float: x = m · 2^e with m in [√½, √2), and log(m) = 2 atanh(t)
// with t = (m − 1) / (m + 1), |t| ≤ 0.172, as its odd series to t⁹ (truncation below 2e-9
// relative). Error in float arithmetic below 2.5e-7 relative (as log1p_of below; tested).
inline float log_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xffu) - 127;
  const uint32_t mantissa_bits = (bits & 0x007fffffu) | 0x3f800000u;  // m in [1, 2)
  float m;
  std::memcpy(&m, &mantissa_bits, sizeof m);
  const bool above = m > 1.41421356f;
  m = above ? m * 0.5f : m;
  exponent = above ? exponent + 1 : exponent;
  const float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
  float p = 1.0f / 9.0f;
  p = p * t2 + 1.0f / 7.0f;
  p = p * t2 + 0.2f;
  p = p * t2 + 1.0f / 3.0f;
  p = p * t2 + 1.0f;
  return 2.0f * t * p + static_cast<float>(exponent) * 0.69314718055994531f;
}
inline double log_of(double x) { return std::log(x); }

// log(1 + u) for u > −1, accurate where 1 + u rounds: with w = 1 + u, log(w) · u / (w − 1)
// cancels w's rounding (and is u itself where w rounds to 1).
template <typename T>
inline T log1p_of(T u) {
  const T w = T(1) + u;
  const T ratio = u / (w == T(1) ? T(1) : w - T(1));
  return w == T(1) ? u : log_of(w) * ratio;
}

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
  if constexpr (Kind == ActivationKind::softplus) {
    return x > T(20) ? x : log1p_of(exp_of(x));
  }
  if constexpr (Kind == ActivationKind::silu) return x / (T(1) + exp_of(-x));
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
  if constexpr (Kind == ActivationKind::softplus) {
    return kept > T(20) ? grad : grad / (T(1) + exp_of(-kept));
  }
  if constexpr (Kind == ActivationKind::silu) {
    const T s = T(1) / (T(1) + exp_of(-kept));
    return grad * (s * (T(1) + kept * (T(1) - s)));
  }
  return grad;
}

// out[j] = activate<Kind>(in[j]) for j < count (out may be in): the one loop every kernel that
// applies an activation runs.
template <ActivationKind Kind, typename T>
inline void activate_all(const T* in, T* out, int64_t count) {
  for (int64_t j = 0; j < count; ++j) out[j] = activate<Kind>(in[j]);
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
    case ActivationKind::softplus:
      return body.template operator()<ActivationKind::softplus>();
    case ActivationKind::silu:
      return body.template operator()<ActivationKind::silu>();
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
