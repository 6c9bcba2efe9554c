#pragma once

// Head sizes known at compile time. The matrix-state kernels loop over a head's key and value
// dimensions at every step; with the sizes as template arguments (the common 4, 8, 16, 32 and
// 64) those loops unroll and keep the head's rows in registers, and the arithmetic, its order
// included, stays exactly that of the run-time loop. 0 means "read at run time".

#include <cstdint>

#include "kernels/common/host_device.h"

namespace memscript::kernels {

template <int64_t Fixed>
MS_HOST_DEVICE constexpr int64_t dim_of(int64_t runtime) {
  return Fixed > 0 ? Fixed : runtime;
}

// Calls f.template operator()<K, V>() with the sizes fixed where (key_dim, value_dim) is one of
// the compiled pairs, else with <0, 0> (host code only).
template <typename F>
void with_fixed_dims(int64_t key_dim, int64_t value_dim, F&& f) {
  if (key_dim == value_dim) {
    switch (key_dim) {
      case 4:
        return f.template operator()<4, 4>();
      case 8:
        return f.template operator()<8, 8>();
      case 16:
        return f.template operator()<16, 16>();
      case 32:
        return f.template operator()<32, 32>();
      case 64:
        return f.template operator()<64, 64>();
      default:
        break;
    }
  }
  f.template operator()<0, 0>();
}

}  // namespace memscript::kernels
