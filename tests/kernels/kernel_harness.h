#pragma once

// Helpers for the kernel tests: random inputs, the (block, thread) loop that emulates a CUDA
// launch on the CPU, and central finite differences, the oracle for hand-written backwards.

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/cuda_device.h"

namespace memscript::kernels::test {

inline std::vector<double> random_values(size_t count, double low, double high, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> draw(low, high);
  std::vector<double> values(count);
  for (double& v : values) v = draw(rng);
  return values;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& values) {
  return std::vector<T>(values.begin(), values.end());
}

// Calls thread_body(block, thread) for every thread of `blocks` blocks, as a CUDA launch would
// (in some order; the bodies must not depend on it).
inline void emulate_launch(int64_t blocks, int64_t threads_per_block,
                           const std::function<void(int64_t, int64_t)>& thread_body) {
  for (int64_t block = 0; block < blocks; ++block) {
    for (int64_t thread = 0; thread < threads_per_block; ++thread) thread_body(block, thread);
  }
}

// d loss / d x[i] for every i, by central differences of loss() while x is perturbed in place.
inline std::vector<double> numeric_gradient(std::vector<double>& x,
                                            const std::function<double()>& loss,
                                            double step = 1e-6) {
  std::vector<double> gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double kept = x[i];
    x[i] = kept + step;
    const double up = loss();
    x[i] = kept - step;
    const double down = loss();
    x[i] = kept;
    gradient[i] = (up - down) / (2 * step);
  }
  return gradient;
}

// Σ weights · values: a loss that gives every output its own gradient.
inline double weighted_sum(const std::vector<double>& values, const std::vector<double>& weights) {
  double sum = 0;
  for (size_t i = 0; i < values.size(); ++i) sum += values[i] * weights[i];
  return sum;
}

inline void require_close(const std::vector<double>& actual, const std::vector<double>& expected,
                          double tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("index " << i);
    REQUIRE(actual[i] == Approx(expected[i]).margin(tolerance).epsilon(tolerance));
  }
}

// Whether a GPU is here; if so, says that the launchers' failure path cannot be reached.
inline bool gpu_present() {
  if (cuda_device_count() == 0) return false;
  WARN("a GPU is present: the launch failure path is not reachable here");
  return true;
}

// A CUDA launcher called without a GPU (or without CUDA kernels in the build) returns false
// and says why in `message`.
inline void check_launch_fails(const std::function<bool(const char** message)>& launch) {
  const char* message = nullptr;
  CHECK_FALSE(launch(&message));
  REQUIRE(message != nullptr);
  CHECK(std::string(message).size() > 0);
}

}  // namespace memscript::kernels::test
