#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "kernel_harness.h"
#include "kernels/diag_scan.h"

using namespace memscript::kernels;

namespace {

struct ScanCase {
  DiagScanShape shape;
  std::vector<double> a, b, h0;
};

ScanCase random_case(DiagScanShape shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> decay(-1.0, 1.0), input(-2.0, 2.0);
  ScanCase c{shape, {}, {}, {}};
  const size_t cells = static_cast<size_t>(shape.batch * shape.length * shape.channels);
  for (size_t i = 0; i < cells; ++i) {
    c.a.push_back(decay(rng));
    c.b.push_back(input(rng));
  }
  for (int64_t i = 0; i < shape.batch * shape.channels; ++i) c.h0.push_back(input(rng));
  return c;
}

// The recurrence written out index by index, as the reference.
std::vector<double> reference(const ScanCase& c, bool with_h0) {
  const auto [batch, length, channels] = c.shape;
  std::vector<double> h(c.a.size());
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t ch = 0; ch < channels; ++ch) {
      double state = with_h0 ? c.h0[n * channels + ch] : 0.0;
      for (int64_t t = 0; t < length; ++t) {
        const size_t i = static_cast<size_t>((n * length + t) * channels + ch);
        state = c.a[i] * state + c.b[i];
        h[i] = state;
      }
    }
  }
  return h;
}

}  // namespace

TEST_CASE("diagonal scan on the CPU matches the written-out recurrence") {
  for (const DiagScanShape shape :
       {DiagScanShape{1, 1, 1}, DiagScanShape{2, 7, 3}, DiagScanShape{3, 33, 5}}) {
    const ScanCase c = random_case(shape, 1);
    for (const bool with_h0 : {false, true}) {
      std::vector<double> h(c.a.size()), last(c.h0.size());
      diag_scan_forward_cpu(c.a.data(), c.b.data(), with_h0 ? c.h0.data() : nullptr, h.data(),
                            last.data(), shape, 0, shape.batch * shape.channels);
      const std::vector<double> expected = reference(c, with_h0);
      for (size_t i = 0; i < h.size(); ++i) REQUIRE(h[i] == Approx(expected[i]).epsilon(1e-12));
      for (int64_t n = 0; n < shape.batch; ++n) {
        for (int64_t ch = 0; ch < shape.channels; ++ch) {
          const size_t end =
              static_cast<size_t>((n * shape.length + shape.length - 1) * shape.channels + ch);
          REQUIRE(last[n * shape.channels + ch] == expected[end]);
        }
      }
    }
  }
}

TEST_CASE("diagonal scan split into channel ranges gives the same result as one range") {
  const DiagScanShape shape{4, 9, 6};
  const ScanCase c = random_case(shape, 2);
  std::vector<double> whole(c.a.size()), split(c.a.size());
  diag_scan_forward_cpu(c.a.data(), c.b.data(), c.h0.data(), whole.data(), nullptr, shape, 0, 24);
  for (int64_t begin = 0; begin < 24; begin += 5) {
    diag_scan_forward_cpu(c.a.data(), c.b.data(), c.h0.data(), split.data(), nullptr, shape, begin,
                          std::min<int64_t>(begin + 5, 24));
  }
  CHECK(whole == split);
}

TEST_CASE("the CUDA kernel's per-thread body, run over every block and thread, matches the CPU") {
  // More channels than one block holds, and a partial last block, to exercise the guard.
  const DiagScanShape shape{3, 11, 100};
  const ScanCase c = random_case(shape, 3);
  std::vector<float> a(c.a.begin(), c.a.end()), b(c.b.begin(), c.b.end()),
      h0(c.h0.begin(), c.h0.end());
  std::vector<float> emulated(a.size(), -7.0f), last(h0.size(), -7.0f);
  const int64_t blocks = diag_scan_blocks(shape);
  REQUIRE(blocks * kDiagScanThreadsPerBlock >= shape.batch * shape.channels);
  for (int64_t block = 0; block < blocks; ++block) {
    for (int64_t thread = 0; thread < kDiagScanThreadsPerBlock; ++thread) {
      diag_scan_thread<float, float>(a.data(), b.data(), h0.data(), emulated.data(), last.data(),
                                     shape, block, thread, kDiagScanThreadsPerBlock);
    }
  }
  std::vector<float> cpu(a.size()), cpu_last(h0.size());
  diag_scan_forward_cpu(a.data(), b.data(), h0.data(), cpu.data(), cpu_last.data(), shape, 0,
                        shape.batch * shape.channels);
  CHECK(emulated == cpu);
  CHECK(last == cpu_last);
}

TEST_CASE("without a GPU the CUDA launcher fails with a message instead of crashing") {
  if (cuda_device_count() > 0) {
    WARN("a GPU is present: the launch failure path is not reachable here");
    return;
  }
  const DiagScanShape shape{1, 1, 1};
  float x = 0;
  const char* message = nullptr;
  CHECK_FALSE(diag_scan_forward_cuda(&x, &x, nullptr, &x, nullptr, shape, nullptr, &message));
  REQUIRE(message != nullptr);
  CHECK(std::string(message).size() > 0);
}

namespace {

using memscript::kernels::test::cast;
using memscript::kernels::test::emulate_launch;
using memscript::kernels::test::numeric_gradient;
using memscript::kernels::test::random_values;
using memscript::kernels::test::require_close;
using memscript::kernels::test::weighted_sum;

// Loss = Σ g·h + Σ g_last·h_last through the CPU forward, for finite differences.
struct ScanLoss {
  DiagScanShape shape;
  std::vector<double> g, g_last;

  double operator()(const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<double>* h0) const {
    std::vector<double> h(a.size()), last(g_last.size());
    diag_scan_forward_cpu(a.data(), b.data(), h0 ? h0->data() : nullptr, h.data(), last.data(),
                          shape, 0, shape.batch * shape.channels);
    return weighted_sum(h, g) + weighted_sum(last, g_last);
  }
};

}  // namespace

TEST_CASE("diagonal scan backward matches finite differences, final-state gradient included") {
  for (const DiagScanShape shape :
       {DiagScanShape{1, 1, 1}, DiagScanShape{2, 7, 3}, DiagScanShape{1, 12, 2}}) {
    for (const bool with_h0 : {false, true}) {
      ScanCase c = random_case(shape, 4);
      const ScanLoss loss{shape, random_values(c.a.size(), -1, 1, 5),
                          random_values(c.h0.size(), -1, 1, 6)};
      std::vector<double> h(c.a.size());
      diag_scan_forward_cpu(c.a.data(), c.b.data(), with_h0 ? c.h0.data() : nullptr, h.data(),
                            nullptr, shape, 0, shape.batch * shape.channels);
      std::vector<double> grad_a(c.a.size()), grad_b(c.a.size()), grad_h0(c.h0.size());
      const DiagScanGrads<double> grads{
          c.a.data(),    h.data(),           with_h0 ? c.h0.data() : nullptr,
          loss.g.data(), loss.g_last.data(), grad_a.data(),
          grad_b.data(), grad_h0.data()};
      diag_scan_backward_cpu(grads, shape, 0, shape.batch * shape.channels);
      const std::vector<double>* h0 = with_h0 ? &c.h0 : nullptr;
      require_close(grad_a, numeric_gradient(c.a, [&] { return loss(c.a, c.b, h0); }), 1e-7);
      require_close(grad_b, numeric_gradient(c.b, [&] { return loss(c.a, c.b, h0); }), 1e-7);
      if (with_h0) {
        require_close(grad_h0, numeric_gradient(c.h0, [&] { return loss(c.a, c.b, &c.h0); }), 1e-7);
      }
    }
  }
}

TEST_CASE(
    "the CUDA backward kernel's per-thread body, run over every block and thread, matches "
    "the CPU") {
  const DiagScanShape shape{3, 11, 100};
  const ScanCase c = random_case(shape, 7);
  const std::vector<float> a = cast<float>(c.a), b = cast<float>(c.b), h0 = cast<float>(c.h0);
  const std::vector<float> g = cast<float>(random_values(a.size(), -1, 1, 8));
  const std::vector<float> g_last = cast<float>(random_values(h0.size(), -1, 1, 9));
  std::vector<float> h(a.size());
  diag_scan_forward_cpu(a.data(), b.data(), h0.data(), h.data(), nullptr, shape, 0,
                        shape.batch * shape.channels);
  const auto run = [&](bool emulated) {
    std::vector<float> grad_a(a.size(), -7.0f), grad_b(a.size(), -7.0f), grad_h0(h0.size(), -7.0f);
    const DiagScanGrads<float> grads{a.data(),      h.data(),      h0.data(),     g.data(),
                                     g_last.data(), grad_a.data(), grad_b.data(), grad_h0.data()};
    if (emulated) {
      emulate_launch(
          diag_scan_blocks(shape), kDiagScanThreadsPerBlock, [&](int64_t bl, int64_t th) {
            diag_scan_backward_thread<float, float>(grads, shape, bl, th, kDiagScanThreadsPerBlock);
          });
    } else {
      diag_scan_backward_cpu(grads, shape, 0, shape.batch * shape.channels);
    }
    return std::vector<std::vector<float>>{grad_a, grad_b, grad_h0};
  };
  CHECK(run(true) == run(false));
}
