#pragma once

// The `impl` option every mixer reads and reports in its config(): "fused" (default) runs the
// hand-written kernels of kernels/ where ops::kernels_take(x) (launch.h), "reference" the
// composed libtorch ops that serve as their oracle. Mixers whose only implementation is a
// libtorch fused op accept both and run the same code.

#include <string>

#include "runtime/options.h"

namespace memscript {

struct Impl {
  bool fused;
  const char* name() const { return fused ? "fused" : "reference"; }
};

Impl read_impl(Options& options);

}  // namespace memscript
