// runtime/device.h's flush_denormals: the mode reaches the calling thread and every thread of
// libtorch's intra-op pool, where memscript's kernels and MKL compute.

#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include <vector>

#include "runtime/device.h"

using namespace memscript;

namespace {

// Per chunk of a two-thread parallel_for: a product that underflows (FTZ flushes it) and a
// subnormal read as an input (DAZ reads it as 0).
struct Results {
  std::vector<float> underflow, subnormal_input;
};

Results compute_in_each_thread() {
  Results r{std::vector<float>(2, -1.0f), std::vector<float>(2, -1.0f)};
  at::parallel_for(0, 2, 1, [&r](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      volatile float tiny = 1e-30f, small = 1e-10f, subnormal = 1e-40f, one = 1.0f;
      r.underflow[i] = tiny * small;
      r.subnormal_input[i] = subnormal * one;
    }
  });
  return r;
}

}  // namespace

TEST_CASE("flush_denormals flushes subnormals in the calling thread and every pool thread") {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  volatile float tiny = 1e-30f, small = 1e-10f;
  if (flush_denormals(true)) {
    CHECK(tiny * small == 0.0f);
    const Results flushed = compute_in_each_thread();
    for (int i = 0; i < 2; ++i) {
      INFO("chunk " << i);
      CHECK(flushed.underflow[i] == 0.0f);
      CHECK(flushed.subnormal_input[i] == 0.0f);
    }
  } else {
    WARN("this CPU cannot flush subnormal floats: only the kept mode is checked");
  }
  CHECK(flush_denormals(false));
  CHECK(tiny * small > 0.0f);
  const Results kept = compute_in_each_thread();
  for (int i = 0; i < 2; ++i) {
    INFO("chunk " << i);
    CHECK(kept.underflow[i] > 0.0f);
    CHECK(kept.subnormal_input[i] > 0.0f);
  }
  at::set_num_threads(threads);
}
