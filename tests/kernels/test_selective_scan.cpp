#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernel_harness.h"
#include "kernels/selective_scan/selective_scan.h"

using namespace memscript::kernels;
using namespace memscript::kernels::test;

namespace {

struct SelectiveCase {
  SelectiveScanShape s;
  bool negative;
  std::vector<double> u, delta, A, B, C, h0, grad_y, grad_last;

  SelectiveCase(SelectiveScanShape shape, bool negative_eigenvalues, unsigned seed)
      : s(shape), negative(negative_eigenvalues) {
    const auto cells = static_cast<size_t>(s.batch * s.length * s.channels);
    const auto rows = static_cast<size_t>(s.batch * s.length * s.states);
    const auto state = static_cast<size_t>(s.batch * s.channels * s.states);
    u = random_values(cells, -1, 1, seed);
    delta = random_values(cells, 0.05, 1.0, seed + 1);
    A = random_values(static_cast<size_t>(s.channels * s.states), -2.0, -0.1, seed + 2);
    B = random_values(rows, -1, 1, seed + 3);
    C = random_values(rows, -1, 1, seed + 4);
    h0 = random_values(state, -1, 1, seed + 5);
    grad_y = random_values(cells, -1, 1, seed + 6);
    grad_last = random_values(state, -1, 1, seed + 7);
  }
  size_t state_size() const { return h0.size(); }
};

struct Forward {
  std::vector<double> y, h_last, checkpoints;
};

Forward run_forward(const SelectiveCase& c, bool with_h0) {
  Forward o{std::vector<double>(c.u.size()), std::vector<double>(c.state_size()),
            std::vector<double>(static_cast<size_t>(c.s.segments()) * c.state_size())};
  const SelectiveScanForward<double, double> f{
      c.u.data(), c.delta.data(),  c.A.data(),
      c.B.data(), c.C.data(),      with_h0 ? c.h0.data() : nullptr,
      o.y.data(), o.h_last.data(), o.checkpoints.data(),
      c.negative};
  selective_scan_forward_cpu(f, c.s, 0, c.s.batch * c.s.channels);
  return o;
}

// The scan written out state by state, as the oracle for the forward.
Forward written_out(const SelectiveCase& c) {
  const SelectiveScanShape s = c.s;
  Forward o{std::vector<double>(c.u.size()), c.h0, {}};
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t d = 0; d < s.channels; ++d) {
      for (int64_t t = 0; t < s.length; ++t) {
        const size_t i = static_cast<size_t>((n * s.length + t) * s.channels + d);
        double y = 0;
        for (int64_t k = 0; k < s.states; ++k) {
          const double e = std::exp(c.delta[i] * c.A[d * s.states + k]);
          const double a = c.negative ? 2 * e - 1 : e;
          const size_t row = static_cast<size_t>((n * s.length + t) * s.states + k);
          double& h = o.h_last[static_cast<size_t>((n * s.channels + d) * s.states + k)];
          h = a * h + c.delta[i] * c.u[i] * c.B[row];
          y += c.C[row] * h;
        }
        o.y[i] = y;
      }
    }
  }
  return o;
}

struct Backward {
  std::vector<double> u, delta, A, B, C, h0;  // A: summed over batch; B, C: over groups
};

template <typename T>
struct BackwardBuffers {
  std::vector<T> u, delta, A, B, C, h0, scratch;
  BackwardBuffers(SelectiveScanShape s)
      : u(static_cast<size_t>(s.batch * s.length * s.channels), T(-7)),
        delta(u),
        A(static_cast<size_t>(s.batch * s.channels * s.states), T(-7)),
        B(static_cast<size_t>(s.batch * s.groups() * s.length * s.states), T(-7)),
        C(B),
        h0(A),
        scratch(static_cast<size_t>(s.batch * s.groups() * segment_scratch_size(s)), T(-7)) {}
};

template <typename T>
SelectiveScanBackward<T, T> backward_args(const std::vector<std::vector<T>>& in,
                                          BackwardBuffers<T>& out, bool negative) {
  // in: u, Δ, A, B, C, checkpoints, grad_y, grad_last
  return {in[0].data(), in[1].data(),     in[2].data(),       in[3].data(),
          in[4].data(), in[5].data(),     in[6].data(),       in[7].data(),
          out.u.data(), out.delta.data(), out.A.data(),       out.B.data(),
          out.C.data(), out.h0.data(),    out.scratch.data(), negative};
}

Backward run_backward(const SelectiveCase& c, bool with_h0) {
  const Forward f = run_forward(c, with_h0);
  BackwardBuffers<double> out(c.s);
  const std::vector<std::vector<double>> in{c.u, c.delta,       c.A,      c.B,
                                            c.C, f.checkpoints, c.grad_y, c.grad_last};
  selective_scan_backward_cpu(backward_args(in, out, c.negative), c.s, 0, c.s.batch * c.s.groups());
  const SelectiveScanShape s = c.s;
  Backward r{out.u,
             out.delta,
             std::vector<double>(c.A.size(), 0.0),
             std::vector<double>(c.B.size(), 0.0),
             std::vector<double>(c.C.size(), 0.0),
             out.h0};
  for (size_t i = 0; i < out.A.size(); ++i) r.A[i % c.A.size()] += out.A[i];
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t g = 0; g < s.groups(); ++g) {
      for (int64_t j = 0; j < s.length * s.states; ++j) {
        const size_t to = static_cast<size_t>(n * s.length * s.states + j);
        const size_t from = static_cast<size_t>((n * s.groups() + g) * s.length * s.states + j);
        r.B[to] += out.B[from];
        r.C[to] += out.C[from];
      }
    }
  }
  return r;
}

double loss(const SelectiveCase& c, bool with_h0) {
  const Forward f = run_forward(c, with_h0);
  return weighted_sum(f.y, c.grad_y) + weighted_sum(f.h_last, c.grad_last);
}

const SelectiveScanShape kShapes[] = {
    {1, 1, 1, 1, 1, 1},    // one of everything
    {2, 7, 3, 4, 3, 2},    // partial last segment and group
    {1, 10, 5, 2, 4, 16},  // one group holds every channel
    {2, 6, 3, 11, 4, 2},   // states over two of the backward's blocks (kStateBlock = 8)
};

}  // namespace

TEST_CASE("selective scan forward matches the scan written out state by state") {
  for (const SelectiveScanShape s : kShapes) {
    for (const bool negative : {false, true}) {
      const SelectiveCase c(s, negative, 21);
      const Forward fused = run_forward(c, true), expected = written_out(c);
      require_close(fused.y, expected.y, 1e-12);
      require_close(fused.h_last, expected.h_last, 1e-12);
    }
  }
}

TEST_CASE("selective scan backward matches finite differences for every input") {
  for (const SelectiveScanShape s : kShapes) {
    for (const bool negative : {false, true}) {
      for (const bool with_h0 : {false, true}) {
        INFO("length " << s.length << ", negative " << negative << ", h0 " << with_h0);
        SelectiveCase c(s, negative, 22);
        const Backward grads = run_backward(c, with_h0);
        const auto f = [&] { return loss(c, with_h0); };
        require_close(grads.u, numeric_gradient(c.u, f), 1e-7);
        require_close(grads.delta, numeric_gradient(c.delta, f), 1e-7);
        require_close(grads.A, numeric_gradient(c.A, f), 1e-7);
        require_close(grads.B, numeric_gradient(c.B, f), 1e-7);
        require_close(grads.C, numeric_gradient(c.C, f), 1e-7);
        if (with_h0) require_close(grads.h0, numeric_gradient(c.h0, f), 1e-7);
      }
    }
  }
}

TEST_CASE("selective scan gradients do not depend on the checkpoint spacing") {
  SelectiveScanShape s{2, 13, 3, 4, 1, 2};
  const SelectiveCase every_step(s, true, 23);
  const Backward reference = run_backward(every_step, true);
  for (const int64_t segment : {2, 5, 13, 40}) {
    s.segment = segment;
    SelectiveCase c = every_step;
    c.s = s;
    const Backward grads = run_backward(c, true);
    CHECK(grads.u == reference.u);
    CHECK(grads.delta == reference.delta);
    CHECK(grads.A == reference.A);
    CHECK(grads.h0 == reference.h0);
    require_close(grads.B, reference.B, 1e-12);
  }
}

TEST_CASE(
    "the selective scan CUDA kernels' per-thread bodies, run over every block and thread, "
    "match the CPU") {
  // Mamba's 16 states and 12 take the CPU's transposed sums over lanes (eight states at a
  // time); 4 its scalar tail.
  for (const int64_t states : {4, 12, 16}) {
    INFO(states << " states");
    const SelectiveScanShape s{3, 9, 50, states, 3, 16};  // partial blocks, groups, segments
    const SelectiveCase c(s, true, 24);
    std::vector<std::vector<float>> in;
    for (const auto* v : {&c.u, &c.delta, &c.A, &c.B, &c.C, &c.h0}) in.push_back(cast<float>(*v));
    const auto forward = [&](bool emulated) {
      std::vector<std::vector<float>> out{
          std::vector<float>(in[0].size(), -7.0f), std::vector<float>(in[5].size(), -7.0f),
          std::vector<float>(static_cast<size_t>(s.segments()) * in[5].size(), -7.0f)};
      const SelectiveScanForward<float, float> f{
          in[0].data(), in[1].data(),  in[2].data(),  in[3].data(),  in[4].data(),
          in[5].data(), out[0].data(), out[1].data(), out[2].data(), true};
      if (emulated) {
        emulate_launch(selective_scan_blocks(s.batch * s.channels), kSelectiveScanThreadsPerBlock,
                       [&](int64_t b, int64_t t) {
                         selective_scan_thread<float, float>(f, s, b, t,
                                                             kSelectiveScanThreadsPerBlock);
                       });
      } else {
        selective_scan_forward_cpu(f, s, 0, s.batch * s.channels);
      }
      return out;
    };
    const std::vector<std::vector<float>> outputs = forward(false);
    CHECK(forward(true) == outputs);
    const std::vector<std::vector<float>> saved{in[0],
                                                in[1],
                                                in[2],
                                                in[3],
                                                in[4],
                                                outputs[2],
                                                cast<float>(c.grad_y),
                                                cast<float>(c.grad_last)};
    const auto backward = [&](bool emulated) {
      BackwardBuffers<float> out(s);
      const SelectiveScanBackward<float, float> g = backward_args(saved, out, true);
      if (emulated) {
        emulate_launch(selective_scan_blocks(s.batch * s.groups()), kSelectiveScanThreadsPerBlock,
                       [&](int64_t b, int64_t t) {
                         selective_scan_backward_thread<float, float>(
                             g, s, b, t, kSelectiveScanThreadsPerBlock);
                       });
      } else {
        selective_scan_backward_cpu(g, s, 0, s.batch * s.groups());
      }
      return std::vector<std::vector<float>>{out.u, out.delta, out.A, out.B, out.C, out.h0};
    };
    CHECK(backward(true) == backward(false));
  }
}

TEST_CASE("the scans' exp agrees with libm to a few ulp over the transitions' range") {
  for (double x = -90.0; x <= 10.0; x += 0.0137) {
    INFO("x = " << x);
    if (x > -80.0) {
      const float xf = static_cast<float>(x);
      REQUIRE(exp_of(xf) == Approx(std::exp(xf)).epsilon(5e-7));
    } else {
      REQUIRE(exp_of(static_cast<float>(x)) < 1e-34f);
    }
    REQUIRE(exp_of(x) == Approx(std::exp(x)).epsilon(1e-15));
  }
  CHECK(exp_of(0.0f) == 1.0f);
  CHECK(exp_of(0.0) == 1.0);
  CHECK(exp_of(-1000.0) < 1e-300);
}
