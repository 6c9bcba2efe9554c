#include <catch2/catch.hpp>

#include <complex>
#include <vector>

#include "kernel_harness.h"
#include "kernels/complex_scan/complex_scan.h"

using namespace memscript::kernels;
using namespace memscript::kernels::test;

namespace {

// λ inside the unit disk; b, h0 and the loss weights anywhere.
struct ComplexCase {
  ComplexScanShape shape;
  std::vector<double> lambda_re, lambda_im, b_re, b_im, h0_re, h0_im, g_re, g_im, gl_re, gl_im;

  ComplexCase(ComplexScanShape s, unsigned seed) : shape(s) {
    const size_t cells = static_cast<size_t>(s.batch * s.length * s.channels);
    const size_t states = static_cast<size_t>(s.batch * s.channels);
    const size_t channels = static_cast<size_t>(s.channels);
    lambda_re = random_values(channels, -0.7, 0.7, seed);
    lambda_im = random_values(channels, -0.7, 0.7, seed + 1);
    b_re = random_values(cells, -1, 1, seed + 2);
    b_im = random_values(cells, -1, 1, seed + 3);
    h0_re = random_values(states, -1, 1, seed + 4);
    h0_im = random_values(states, -1, 1, seed + 5);
    g_re = random_values(cells, -1, 1, seed + 6);
    g_im = random_values(cells, -1, 1, seed + 7);
    gl_re = random_values(states, -1, 1, seed + 8);
    gl_im = random_values(states, -1, 1, seed + 9);
  }
};

struct ComplexOutputs {
  std::vector<double> h_re, h_im, last_re, last_im;
};

ComplexOutputs run_forward(const ComplexCase& c, bool with_h0) {
  ComplexOutputs o{std::vector<double>(c.b_re.size()), std::vector<double>(c.b_re.size()),
                   std::vector<double>(c.h0_re.size()), std::vector<double>(c.h0_re.size())};
  const ComplexScanForward<double> f{c.lambda_re.data(),
                                     c.lambda_im.data(),
                                     c.b_re.data(),
                                     c.b_im.data(),
                                     with_h0 ? c.h0_re.data() : nullptr,
                                     with_h0 ? c.h0_im.data() : nullptr,
                                     o.h_re.data(),
                                     o.h_im.data(),
                                     o.last_re.data(),
                                     o.last_im.data()};
  complex_scan_forward_cpu(f, c.shape, 0, c.shape.batch);
  return o;
}

double loss(const ComplexCase& c, bool with_h0) {
  const ComplexOutputs o = run_forward(c, with_h0);
  return weighted_sum(o.h_re, c.g_re) + weighted_sum(o.h_im, c.g_im) +
         weighted_sum(o.last_re, c.gl_re) + weighted_sum(o.last_im, c.gl_im);
}

struct ComplexGrads {
  std::vector<double> b_re, b_im, h0_re, h0_im, lambda_re, lambda_im;  // λ: per (batch, channel)
};

template <typename T>
struct Buffers {
  std::vector<T> b_re, b_im, h0_re, h0_im, lambda_re, lambda_im;
  explicit Buffers(ComplexScanShape s)
      : b_re(static_cast<size_t>(s.batch * s.length * s.channels), T(-7)),
        b_im(b_re),
        h0_re(static_cast<size_t>(s.batch * s.channels), T(-7)),
        h0_im(h0_re),
        lambda_re(h0_re),
        lambda_im(h0_re) {}
  bool operator==(const Buffers&) const = default;
};

template <typename T>
ComplexScanBackward<T> backward_args(const std::vector<std::vector<T>>& in, Buffers<T>& out,
                                     bool with_h0) {
  // in: λre, λim, h_re, h_im, h0_re, h0_im, g_re, g_im, gl_re, gl_im
  return {in[0].data(),
          in[1].data(),
          in[2].data(),
          in[3].data(),
          with_h0 ? in[4].data() : nullptr,
          with_h0 ? in[5].data() : nullptr,
          in[6].data(),
          in[7].data(),
          in[8].data(),
          in[9].data(),
          out.b_re.data(),
          out.b_im.data(),
          out.h0_re.data(),
          out.h0_im.data(),
          out.lambda_re.data(),
          out.lambda_im.data()};
}

std::vector<double> sum_over_batch(const std::vector<double>& per_row, ComplexScanShape s) {
  std::vector<double> sum(static_cast<size_t>(s.channels), 0.0);
  for (size_t i = 0; i < per_row.size(); ++i) sum[i % sum.size()] += per_row[i];
  return sum;
}

}  // namespace

TEST_CASE("complex scan forward matches std::complex written out") {
  // Several chunks of steps (the last one partial), a channel count of compile-time length, and
  // a length at which the chunks prefetch (kPrefetchMinLength).
  const ComplexScanShape shape =
      GENERATE(ComplexScanShape{2, 9, 3}, ComplexScanShape{3, 75, 4}, ComplexScanShape{2, 600, 4});
  const ComplexCase c(shape, 11);
  const ComplexOutputs o = run_forward(c, true);
  for (int64_t n = 0; n < shape.batch; ++n) {
    for (int64_t ch = 0; ch < shape.channels; ++ch) {
      const std::complex<double> lambda(c.lambda_re[ch], c.lambda_im[ch]);
      std::complex<double> h(c.h0_re[n * shape.channels + ch], c.h0_im[n * shape.channels + ch]);
      for (int64_t t = 0; t < shape.length; ++t) {
        const size_t i = static_cast<size_t>((n * shape.length + t) * shape.channels + ch);
        h = lambda * h + std::complex<double>(c.b_re[i], c.b_im[i]);
        REQUIRE(o.h_re[i] == Approx(h.real()).epsilon(1e-12));
        REQUIRE(o.h_im[i] == Approx(h.imag()).epsilon(1e-12));
      }
      REQUIRE(o.last_re[n * shape.channels + ch] == Approx(h.real()).epsilon(1e-12));
    }
  }
}

TEST_CASE("complex scan backward matches finite differences for b, h0 and λ") {
  for (const ComplexScanShape shape : {ComplexScanShape{1, 1, 1}, ComplexScanShape{2, 7, 3},
                                       ComplexScanShape{1, 10, 2}, ComplexScanShape{1, 70, 4}}) {
    for (const bool with_h0 : {false, true}) {
      ComplexCase c(shape, 12);
      const ComplexOutputs o = run_forward(c, with_h0);
      Buffers<double> out(shape);
      const std::vector<std::vector<double>> in{c.lambda_re, c.lambda_im, o.h_re, o.h_im,  c.h0_re,
                                                c.h0_im,     c.g_re,      c.g_im, c.gl_re, c.gl_im};
      complex_scan_backward_cpu(backward_args(in, out, with_h0), shape, 0, shape.batch);
      const auto f = [&] { return loss(c, with_h0); };
      require_close(out.b_re, numeric_gradient(c.b_re, f), 1e-7);
      require_close(out.b_im, numeric_gradient(c.b_im, f), 1e-7);
      require_close(sum_over_batch(out.lambda_re, shape), numeric_gradient(c.lambda_re, f), 1e-7);
      require_close(sum_over_batch(out.lambda_im, shape), numeric_gradient(c.lambda_im, f), 1e-7);
      if (with_h0) {
        require_close(out.h0_re, numeric_gradient(c.h0_re, f), 1e-7);
        require_close(out.h0_im, numeric_gradient(c.h0_im, f), 1e-7);
      }
    }
  }
}

TEST_CASE(
    "the complex scan CUDA kernels' per-thread bodies, run over every block and thread, "
    "match the CPU") {
  const ComplexScanShape shape{3, 11, 100};  // a partial last block
  const ComplexCase c(shape, 13);
  std::vector<std::vector<float>> in;
  for (const auto* v : {&c.lambda_re, &c.lambda_im, &c.b_re, &c.b_im, &c.h0_re, &c.h0_im, &c.g_re,
                        &c.g_im, &c.gl_re, &c.gl_im}) {
    in.push_back(cast<float>(*v));
  }
  const auto forward = [&](bool emulated) {
    std::vector<std::vector<float>> out{
        std::vector<float>(in[2].size(), -7.0f), std::vector<float>(in[2].size(), -7.0f),
        std::vector<float>(in[4].size(), -7.0f), std::vector<float>(in[4].size(), -7.0f)};
    const ComplexScanForward<float> f{in[0].data(),  in[1].data(), in[2].data(),  in[3].data(),
                                      in[4].data(),  in[5].data(), out[0].data(), out[1].data(),
                                      out[2].data(), out[3].data()};
    if (emulated) {
      emulate_launch(
          complex_scan_blocks(shape), kComplexScanThreadsPerBlock, [&](int64_t b, int64_t t) {
            complex_scan_thread<float, float>(f, shape, b, t, kComplexScanThreadsPerBlock);
          });
    } else {
      complex_scan_forward_cpu(f, shape, 0, shape.batch);
    }
    return out;
  };
  const std::vector<std::vector<float>> states = forward(false);
  CHECK(forward(true) == states);
  const std::vector<std::vector<float>> saved{in[0], in[1], states[0], states[1], in[4],
                                              in[5], in[6], in[7],     in[8],     in[9]};
  const auto backward = [&](bool emulated) {
    Buffers<float> out(shape);
    const ComplexScanBackward<float> g = backward_args(saved, out, true);
    if (emulated) {
      emulate_launch(
          complex_scan_blocks(shape), kComplexScanThreadsPerBlock, [&](int64_t b, int64_t t) {
            complex_scan_backward_thread<float, float>(g, shape, b, t, kComplexScanThreadsPerBlock);
          });
    } else {
      complex_scan_backward_cpu(g, shape, 0, shape.batch);
    }
    return out;
  };
  CHECK(backward(true) == backward(false));
}

TEST_CASE("the complex scan on the CPU gives the same bits split into ranges of batch rows") {
  // 11 rows of 3 channels: groups of 10 rows, and splits that cut through them.
  const ComplexScanShape shape{11, 40, 3};
  const ComplexCase c(shape, 14);
  const auto run = [&](int64_t split) {
    std::vector<double> h_re(c.b_re.size()), h_im(h_re.size()), last_re(c.h0_re.size()),
        last_im(last_re.size());
    const ComplexScanForward<double> f{
        c.lambda_re.data(), c.lambda_im.data(), c.b_re.data(), c.b_im.data(),  c.h0_re.data(),
        c.h0_im.data(),     h_re.data(),        h_im.data(),   last_re.data(), last_im.data()};
    for (int64_t n = 0; n < shape.batch; n += split)
      complex_scan_forward_cpu(f, shape, n, std::min(shape.batch, n + split));
    Buffers<double> out(shape);
    const std::vector<std::vector<double>> in{c.lambda_re, c.lambda_im, h_re,   h_im,    c.h0_re,
                                              c.h0_im,     c.g_re,      c.g_im, c.gl_re, c.gl_im};
    const ComplexScanBackward<double> g = backward_args(in, out, true);
    for (int64_t n = 0; n < shape.batch; n += split)
      complex_scan_backward_cpu(g, shape, n, std::min(shape.batch, n + split));
    return std::make_pair(std::vector<std::vector<double>>{h_re, h_im, last_re, last_im},
                          std::vector<std::vector<double>>{out.b_re, out.b_im, out.lambda_re,
                                                           out.lambda_im, out.h0_re, out.h0_im});
  };
  CHECK(run(3) == run(shape.batch));
}
