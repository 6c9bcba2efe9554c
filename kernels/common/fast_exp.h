#pragma once

// exp for the scans' transitions, written so that a loop over states vectorizes on the CPU: no
// library call, no branch. Range reduction x = k·ln2 + r with |r| <= ln2/2 (k rounded with the
// 1.5·2^m trick), a Taylor polynomial for e^r, and 2^k added straight into the exponent bits.
// Accuracy: a few ulp in float and double (degree 7 and 12), against libm's ~1 ulp. Inputs are
// clamped to where 2^k stays a normal number; below that exp(x) is returned as exp(-80) (float)
// or exp(-700) (double), differences under 1e-34 that no transition can tell apart.
// On the GPU the hardware's expf / exp are used instead.

#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels/common/host_device.h"

namespace memscript::kernels {

#ifndef __CUDA_ARCH__
namespace fast_exp_detail {

template <typename To, typename From>
inline To bits_as(From value) {
  To result;
  std::memcpy(&result, &value, sizeof result);
  return result;
}

constexpr float kShift = 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer

// p · 2^k, with k the integer that `shifted` carries (x·log2(e) + kShift), put straight into
// the exponent bits. In unsigned arithmetic, which wraps where a NaN input would overflow a
// signed int. (row_tile.h has the same for a vector of floats.)
struct TimesPowerOfTwo {
  float operator()(float p, float shifted) const {
    const uint32_t exponent = bits_as<uint32_t>(shifted) - bits_as<uint32_t>(kShift);
    return bits_as<float>(bits_as<uint32_t>(p) + (exponent << 23));
  }
};

// exp on a float, or on a vector of floats given the vector's TimesPowerOfTwo: one body for
// both, so that a lane gives the same bits as the scalar.
template <typename V, typename Scale>
inline V exp_float(V x, Scale times_power_of_two) {
  x = x < -80.0f ? V{} - 80.0f : (x > 80.0f ? V{} + 80.0f : x);
  const V shifted = x * 1.44269504088896341f + kShift;
  const V k = shifted - kShift;
  const V r = (x - k * 0.693145751953125f) - k * 1.428606765330187045e-06f;
  V p = V{} + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return times_power_of_two(p, shifted);
}

}  // namespace fast_exp_detail
#endif

MS_HOST_DEVICE inline float exp_of(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  return fast_exp_detail::exp_float(x, fast_exp_detail::TimesPowerOfTwo{});
#endif
}

MS_HOST_DEVICE inline double exp_of(double x) {
#ifdef __CUDA_ARCH__
  return exp(x);
#else
  using fast_exp_detail::bits_as;
  constexpr double kShift = 6755399441055744.0;  // 1.5 · 2^52
  x = x < -700.0 ? -700.0 : (x > 700.0 ? 700.0 : x);
  const double shifted = x * 1.4426950408889634074 + kShift;
  const double k = shifted - kShift;
  const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const uint64_t exponent = bits_as<uint64_t>(shifted) - bits_as<uint64_t>(kShift);
  return bits_as<double>(bits_as<uint64_t>(p) + (exponent << 52));
#endif
}

}  // namespace memscript::kernels
