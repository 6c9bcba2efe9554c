#include <catch2/catch.hpp>

#include <random>
#include <vector>

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
