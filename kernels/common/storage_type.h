#pragma once

// The element types the matrix-state kernels read and write, and the type they compute in:
// float and double compute in themselves; bf16 (GPU inputs) computes and keeps its state in
// float. Bf16 is the bare 16-bit pattern, so these headers need neither CUDA's nor libtorch's
// bf16 type and the bf16 path runs on the CPU under the tests' emulation too.

#include <cstdint>
#include <cstring>

#include "kernels/common/host_device.h"

namespace memscript::kernels {

struct Bf16 {
  uint16_t bits;
};

template <typename T>
struct Accumulator {
  using type = T;
};
template <>
struct Accumulator<Bf16> {
  using type = float;
};
template <typename T>
using AccumulatorOf = typename Accumulator<T>::type;

MS_HOST_DEVICE inline float load(float x) { return x; }
MS_HOST_DEVICE inline double load(double x) { return x; }
MS_HOST_DEVICE inline float load(Bf16 x) {
  const uint32_t bits = static_cast<uint32_t>(x.bits) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

MS_HOST_DEVICE inline void store(float x, float* out) { *out = x; }
MS_HOST_DEVICE inline void store(double x, double* out) { *out = x; }
// Round to nearest even, as libtorch and CUDA convert (NaN stays NaN through the quiet bit).
MS_HOST_DEVICE inline void store(float x, Bf16* out) {
#ifdef __CUDA_ARCH__
  uint32_t bits = __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    out->bits = static_cast<uint16_t>((bits >> 16) | 0x40u);
    return;
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  out->bits = static_cast<uint16_t>(bits >> 16);
}

}  // namespace memscript::kernels
