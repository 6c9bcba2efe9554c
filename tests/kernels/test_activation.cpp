// The pointwise activations (kernels/common/activation.h) against their formulas written with libm,
// their backward against finite differences, and the float erf's accuracy bound.

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernel_harness.h"
#include "kernels/common/activation.h"

using namespace memscript::kernels;
using memscript::kernels::test::random_values;
using memscript::kernels::test::require_close;

namespace {

// The activations as their textbook formulas, in double with libm.
double formula(ActivationKind kind, double x) {
  switch (kind) {
    case ActivationKind::none:
      return x;
    case ActivationKind::gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case ActivationKind::sigmoid:
      return 1 / (1 + std::exp(-x));
    case ActivationKind::elu_plus_one:
      return (x > 0 ? x : std::expm1(x)) + 1;
    case ActivationKind::relu:
      return x > 0 ? x : 0;
    case ActivationKind::softplus:
      return x > 20 ? x : std::log1p(std::exp(x));
    case ActivationKind::silu:
      return x / (1 + std::exp(-x));
  }
  return x;
}

std::vector<double> inputs() {
  // Both signs, large magnitudes (where σ and e^x saturate), and values near 0.
  std::vector<double> x = random_values(500, -9, 9, 21);
  for (const double v : {-40.0, -1e-9, 0.0, 1e-9, 0.3, 40.0}) x.push_back(v);
  return x;
}

}  // namespace

TEST_CASE("activations match their libm formulas in double") {
  const auto kind = GENERATE(ActivationKind::none, ActivationKind::gelu, ActivationKind::sigmoid,
                             ActivationKind::elu_plus_one, ActivationKind::relu,
                             ActivationKind::softplus, ActivationKind::silu);
  INFO("activation " << static_cast<int>(kind));
  const std::vector<double> x = inputs();
  std::vector<double> y(x.size()), expected(x.size());
  activation_forward_cpu(kind, x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) expected[i] = formula(kind, x[i]);
  require_close(y, expected, 1e-13);
}

TEST_CASE("activation backward matches finite differences of the forward in double") {
  const auto kind = GENERATE(ActivationKind::none, ActivationKind::gelu, ActivationKind::sigmoid,
                             ActivationKind::elu_plus_one, ActivationKind::relu,
                             ActivationKind::softplus, ActivationKind::silu);
  INFO("activation " << static_cast<int>(kind));
  std::vector<double> x = random_values(200, -6, 6, 22);
  const std::vector<double> grad = random_values(x.size(), -1, 1, 23);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<double> y(x.size()), grad_pre(x.size());
  activation_forward_cpu(kind, x.data(), y.data(), n);
  activation_backward_cpu(kind, grad.data(), keeps_pre_activation(kind) ? x.data() : y.data(),
                          grad_pre.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    const double step = 1e-6, kept = x[i];
    x[i] = kept + step;
    const double up = formula(kind, x[i]);
    x[i] = kept - step;
    const double down = formula(kind, x[i]);
    x[i] = kept;
    INFO("x " << kept);
    CHECK(grad_pre[i] == Approx(grad[i] * (up - down) / (2 * step)).margin(1e-8).epsilon(1e-7));
  }
}

TEST_CASE("float erf stays within 3.5e-7 of libm's erf, absolute and relative") {
  double worst_absolute = 0, worst_relative = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;  // [-6, 6]
    const double exact = std::erf(static_cast<double>(x));
    const double error = std::abs(static_cast<double>(erf_of(x)) - exact);
    worst_absolute = std::max(worst_absolute, error);
    if (exact != 0) worst_relative = std::max(worst_relative, error / std::abs(exact));
  }
  for (const float tiny : {1e-30f, 1e-10f, 1e-5f}) {
    worst_relative =
        std::max(worst_relative, std::abs(erf_of(tiny) - std::erf(static_cast<double>(tiny))) /
                                     std::erf(static_cast<double>(tiny)));
  }
  CHECK(worst_absolute < 3.5e-7);
  CHECK(worst_relative < 3.5e-7);
  CHECK(erf_of(0.0f) == 0.0f);
  CHECK(erf_of(-1.5f) == -erf_of(1.5f));
}

TEST_CASE("float log and log1p stay within 2.5e-7 of libm's, relative") {
  double worst_log = 0, worst_log1p = 0;
  for (int i = -3000; i <= 3000; ++i) {
    const float x = std::pow(10.0f, static_cast<float>(i) * 0.01f);  // 1e-30 .. 1e30
    const double exact = std::log(static_cast<double>(x));
    if (exact != 0) {
      worst_log = std::max(worst_log, std::abs(log_of(x) - exact) / std::abs(exact));
    }
    const double exact1p = std::log1p(static_cast<double>(x));
    worst_log1p = std::max(worst_log1p, std::abs(log1p_of(x) - exact1p) / exact1p);
  }
  CHECK(worst_log < 2.5e-7);
  CHECK(worst_log1p < 2.5e-7);
  CHECK(log_of(1.0f) == 0.0f);
  CHECK(log1p_of(0.0f) == 0.0f);
}

TEST_CASE("float activations agree with the double ones to float precision") {
  const auto kind =
      GENERATE(ActivationKind::gelu, ActivationKind::sigmoid, ActivationKind::elu_plus_one,
               ActivationKind::relu, ActivationKind::softplus, ActivationKind::silu);
  INFO("activation " << static_cast<int>(kind));
  const std::vector<double> x = inputs();
  std::vector<float> xf(x.begin(), x.end()), yf(x.size()), gf(x.size());
  std::vector<double> xd(xf.begin(), xf.end()), yd(x.size()), gd(x.size());
  const auto n = static_cast<int64_t>(x.size());
  activation_forward_cpu(kind, xf.data(), yf.data(), n);
  activation_forward_cpu(kind, xd.data(), yd.data(), n);
  const std::vector<float> ones_f(x.size(), 1.0f);
  const std::vector<double> ones_d(x.size(), 1.0);
  activation_backward_cpu(kind, ones_f.data(), keeps_pre_activation(kind) ? xf.data() : yf.data(),
                          gf.data(), n);
  activation_backward_cpu(kind, ones_d.data(), keeps_pre_activation(kind) ? xd.data() : yd.data(),
                          gd.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("x " << xf[i]);
    CHECK(yf[i] == Approx(yd[i]).margin(1e-6).epsilon(1e-6));
    CHECK(gf[i] == Approx(gd[i]).margin(1e-6).epsilon(1e-5));
  }
}
