#pragma once

// Helpers shared by the matrix-state kernel tests (delta rule, linear attention): random
// inputs, conversion to and from the kernels' element types, and views of contiguous
// [batch, heads, length, width] buffers.

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/sequence_view.h"
#include "kernels/common/storage_type.h"

namespace memscript::test {

inline void fill_uniform(std::vector<double>& values, std::mt19937& rng, double low, double high) {
  std::uniform_real_distribution<double> dist(low, high);
  for (double& x : values) x = dist(rng);
}

template <typename T>
std::vector<T> to_storage(const std::vector<double>& x) {
  std::vector<T> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    kernels::store(static_cast<kernels::AccumulatorOf<T>>(x[i]), &out[i]);
  return out;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(kernels::load(x[i]));
  return out;
}

// A contiguous buffer seen as [batch, heads, length, width].
template <typename T>
kernels::SequenceView<T> view(std::vector<T>& x, int64_t heads, int64_t length, int64_t width) {
  return {x.data(), heads * length * width, length * width, width};
}
template <typename T>
kernels::SequenceView<const T> view(const std::vector<T>& x, int64_t heads, int64_t length,
                                    int64_t width) {
  return {x.data(), heads * length * width, length * width, width};
}

// Central differences of `loss(c)` in every element of `c.*input`, against the kernel's
// gradient `grad` of that input.
template <typename Case, typename Loss>
void check_finite_differences(Case c, std::vector<double> Case::*input,
                              const std::vector<double>& grad, const std::string& name,
                              Loss&& loss) {
  INFO("gradient of " << name);
  const double h = 1e-6;
  REQUIRE(grad.size() == (c.*input).size());
  for (size_t n = 0; n < grad.size(); ++n) {
    const double saved = (c.*input)[n];
    (c.*input)[n] = saved + h;
    const double up = loss(c);
    (c.*input)[n] = saved - h;
    const double down = loss(c);
    (c.*input)[n] = saved;
    INFO("element " << n);
    CHECK(grad[n] == Approx((up - down) / (2 * h)).margin(1e-6).epsilon(1e-6));
  }
}

// Calls body(block, thread) for every block and thread in turn, as a CUDA launch would.
template <typename Body>
void emulate_launch(int64_t blocks, int64_t threads_per_block, Body&& body) {
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t thread = 0; thread < threads_per_block; ++thread) body(block, thread);
}

// Element by element within `tolerance`, relative and absolute (bf16 against float).
inline void check_all_close(const std::vector<std::vector<double>>& a,
                            const std::vector<std::vector<double>>& b, double tolerance) {
  REQUIRE(a.size() == b.size());
  for (size_t r = 0; r < a.size(); ++r) {
    INFO("result " << r);
    REQUIRE(a[r].size() == b[r].size());
    for (size_t n = 0; n < a[r].size(); ++n)
      REQUIRE(a[r][n] == Approx(b[r][n]).epsilon(tolerance).margin(tolerance));
  }
}

}  // namespace memscript::test
