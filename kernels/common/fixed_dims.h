#pragma once

// Head sizes known at compile time. The matrix-state kernels loop over a head's key and value
// dimensions at every step; with the sizes as template arguments (the common 4, 8, 16, 32 and
// 64) those loops unroll and keep the head's rows in registers, and the arithmetic, its order
// included, stays exactly that of the run-time loop. 0 means "read at run time".

#include <cstdint>
#include <type_traits>

#include "kernels/common/host_device.h"

namespace memscript::kernels {

template <int64_t Fixed>
MS_HOST_DEVICE constexpr int64_t dim_of(int64_t runtime) {
  return Fixed > 0 ? Fixed : runtime;
}

// Returns f(std::integral_constant<int64_t, D>{}) with D = dim where dim is one of the compiled
// sizes, else D = 0 (host code only; a generic lambda, so nvcc's C++17 takes it too).
template <typename F>
auto with_fixed_dim(int64_t dim, F&& f) {
  switch (dim) {
    case 4:
      return f(std::integral_constant<int64_t, 4>{});
    case 8:
      return f(std::integral_constant<int64_t, 8>{});
    case 16:
      return f(std::integral_constant<int64_t, 16>{});
    case 32:
      return f(std::integral_constant<int64_t, 32>{});
    case 64:
      return f(std::integral_constant<int64_t, 64>{});
    default:
      return f(std::integral_constant<int64_t, 0>{});
  }
}

// Calls f.template operator()<K, V>() with the sizes fixed where (key_dim, value_dim) is one of
// the compiled pairs (equal sizes), else with <0, 0> (host code only).
template <typename F>
void with_fixed_dims(int64_t key_dim, int64_t value_dim, F&& f) {
  if (key_dim != value_dim) return f.template operator()<0, 0>();
  with_fixed_dim(key_dim, [&](auto size) {
    constexpr int64_t d = decltype(size)::value;
    f.template operator()<d, d>();
  });
}

}  // namespace memscript::kernels
