// kernels/lstm/lstm.h on its own: the forward against the LSTM's equations written out with libm,
// the hand-written backward against central finite differences for every input, the scalar
// row bodies (whose cell formulas the CUDA kernel shares) against the CPU's vector lanes, and
// the launcher's failure without a GPU. The CUDA kernel itself is checked on a GPU by
// tests/gpu (make test-gpu).

#include <algorithm>
#include <cmath>

#include "kernel_harness.h"
#include "kernels/lstm/lstm.h"

using namespace memscript::kernels;
using memscript::kernels::test::check_launch_fails;
using memscript::kernels::test::emulate_launch;
using memscript::kernels::test::gpu_present;
using memscript::kernels::test::numeric_gradient;
using memscript::kernels::test::random_values;
using memscript::kernels::test::weighted_sum;

namespace {

struct Case {
  LstmShape s;
  std::vector<double> pre, weight_hh, h0, c0;
  std::vector<double> grad_y, grad_h_last, grad_c_last;  // the loss's weights
};

Case random_case(LstmShape s, unsigned seed) {
  const auto n = [](int64_t count) { return static_cast<size_t>(count); };
  return {s,
          random_values(n(s.batch * s.length * s.gates()), -1.5, 1.5, seed),
          random_values(n(s.gates() * s.hidden), -0.6, 0.6, seed + 1),
          random_values(n(s.batch * s.hidden), -1, 1, seed + 2),
          random_values(n(s.batch * s.hidden), -1, 1, seed + 3),
          random_values(n(s.batch * s.length * s.hidden), -1, 1, seed + 4),
          random_values(n(s.batch * s.hidden), -1, 1, seed + 5),
          random_values(n(s.batch * s.hidden), -1, 1, seed + 6)};
}

std::vector<double> transposed(const std::vector<double>& w, int64_t rows, int64_t columns) {
  std::vector<double> t(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) t[c * rows + r] = w[r * columns + c];
  }
  return t;
}

template <typename T>
struct ForwardBuffers {
  std::vector<T> outputs, gates, cells, h_last, c_last, scratch, weight_t;
  explicit ForwardBuffers(LstmShape s)
      : outputs(s.batch * s.length * s.hidden),
        gates(s.batch * s.length * s.gates()),
        cells(s.batch * s.length * s.hidden),
        h_last(s.batch * s.hidden),
        c_last(s.batch * s.hidden),
        scratch(s.batch * s.gates()) {}
};

// keep: save gates and cells (training) or not (evaluation, one step's gates in scratch).
template <typename T>
LstmForward<T> forward_args(const std::vector<T>& pre, const std::vector<T>& w_t,
                            const std::vector<T>& h0, const std::vector<T>& c0, bool with_state,
                            ForwardBuffers<T>& out, bool keep) {
  return {pre.data(),
          w_t.data(),
          with_state ? h0.data() : nullptr,
          with_state ? c0.data() : nullptr,
          out.outputs.data(),
          keep ? out.gates.data() : nullptr,
          keep ? out.cells.data() : nullptr,
          out.h_last.data(),
          out.c_last.data(),
          out.scratch.data()};
}

ForwardBuffers<double> run_forward(const Case& c, bool with_state, bool keep = true) {
  ForwardBuffers<double> out(c.s);
  const std::vector<double> w_t = transposed(c.weight_hh, c.s.gates(), c.s.hidden);
  lstm_forward_cpu(forward_args(c.pre, w_t, c.h0, c.c0, with_state, out, keep), c.s, 0, c.s.batch);
  return out;
}

double loss(const Case& c, bool with_state) {
  const ForwardBuffers<double> f = run_forward(c, with_state);
  return weighted_sum(f.outputs, c.grad_y) + weighted_sum(f.h_last, c.grad_h_last) +
         weighted_sum(f.c_last, c.grad_c_last);
}

template <typename T>
struct BackwardBuffers {
  std::vector<T> grad_pre, grad_weight, grad_h0, grad_c0, scratch;
  explicit BackwardBuffers(LstmShape s)
      : grad_pre(s.batch * s.length * s.gates()),
        grad_weight(s.batch * s.gates() * s.hidden),
        grad_h0(s.batch * s.hidden),
        grad_c0(s.batch * s.hidden),
        scratch(s.batch * 4 * s.hidden) {}
};

template <typename T>
LstmBackward<T> backward_args(const std::vector<T>& w, const std::vector<T>& h0,
                              const std::vector<T>& c0, bool with_state, const ForwardBuffers<T>& f,
                              const std::vector<T>& grad_y, const std::vector<T>& grad_h,
                              const std::vector<T>& grad_c, BackwardBuffers<T>& out) {
  return {w.data(),
          with_state ? h0.data() : nullptr,
          with_state ? c0.data() : nullptr,
          f.outputs.data(),
          f.gates.data(),
          f.cells.data(),
          grad_y.data(),
          grad_h.data(),
          grad_c.data(),
          out.grad_pre.data(),
          out.grad_weight.data(),
          with_state ? out.grad_h0.data() : nullptr,
          with_state ? out.grad_c0.data() : nullptr,
          out.scratch.data()};
}

// W_hh's gradient: the per-row partials added in row order.
std::vector<double> summed_weight_gradient(const BackwardBuffers<double>& b, LstmShape s) {
  std::vector<double> sum(static_cast<size_t>(s.gates() * s.hidden), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (size_t m = 0; m < sum.size(); ++m) sum[m] += b.grad_weight[n * sum.size() + m];
  }
  return sum;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

const LstmShape kShapes[] = {
    {1, 1, 1},  // one of everything
    {2, 7, 3},  // odd length and width
    {3, 5, 4},
};

}  // namespace

TEST_CASE("the fused LSTM forward matches the LSTM's equations written out") {
  for (const LstmShape s : kShapes) {
    for (const bool with_state : {false, true}) {
      INFO("batch " << s.batch << ", length " << s.length << ", hidden " << s.hidden
                    << (with_state ? ", from a state" : ""));
      const Case c = random_case(s, 11);
      const ForwardBuffers<double> f = run_forward(c, with_state);
      const ForwardBuffers<double> no_grad = run_forward(c, with_state, false);
      for (int64_t n = 0; n < s.batch; ++n) {
        std::vector<double> h(s.hidden, 0.0), cell(s.hidden, 0.0);
        if (with_state) {
          std::copy_n(c.h0.begin() + n * s.hidden, s.hidden, h.begin());
          std::copy_n(c.c0.begin() + n * s.hidden, s.hidden, cell.begin());
        }
        for (int64_t t = 0; t < s.length; ++t) {
          std::vector<double> z(s.gates());
          for (int64_t m = 0; m < s.gates(); ++m) {
            z[m] = c.pre[(n * s.length + t) * s.gates() + m];
            for (int64_t j = 0; j < s.hidden; ++j) z[m] += c.weight_hh[m * s.hidden + j] * h[j];
          }
          for (int64_t j = 0; j < s.hidden; ++j) {
            const double i = sigmoid(z[j]), f_gate = sigmoid(z[s.hidden + j]);
            const double g = std::tanh(z[2 * s.hidden + j]), o = sigmoid(z[3 * s.hidden + j]);
            cell[j] = f_gate * cell[j] + i * g;
            h[j] = o * std::tanh(cell[j]);
            const size_t at = (n * s.length + t) * s.hidden + j;
            CHECK(f.outputs[at] == Approx(h[j]).epsilon(1e-12).margin(1e-14));
            CHECK(f.cells[at] == Approx(cell[j]).epsilon(1e-12).margin(1e-14));
            CHECK(no_grad.outputs[at] == f.outputs[at]);  // no saved gates: same numbers
          }
        }
        for (int64_t j = 0; j < s.hidden; ++j) {
          CHECK(f.h_last[n * s.hidden + j] == Approx(h[j]).epsilon(1e-12).margin(1e-14));
          CHECK(f.c_last[n * s.hidden + j] == Approx(cell[j]).epsilon(1e-12).margin(1e-14));
        }
      }
    }
  }
}

TEST_CASE("the fused LSTM backward matches finite differences for every input") {
  for (const LstmShape s : kShapes) {
    for (const bool with_state : {false, true}) {
      INFO("batch " << s.batch << ", length " << s.length << ", hidden " << s.hidden
                    << (with_state ? ", from a state" : ""));
      Case c = random_case(s, 23);
      const ForwardBuffers<double> f = run_forward(c, with_state);
      BackwardBuffers<double> b(s);
      lstm_backward_cpu(backward_args(c.weight_hh, c.h0, c.c0, with_state, f, c.grad_y,
                                      c.grad_h_last, c.grad_c_last, b),
                        s, 0, s.batch);
      const auto check = [&](std::vector<double>& input, const std::vector<double>& analytic,
                             const char* name) {
        INFO(name);
        const std::vector<double> numeric =
            numeric_gradient(input, [&] { return loss(c, with_state); });
        for (size_t i = 0; i < numeric.size(); ++i)
          CHECK(analytic[i] == Approx(numeric[i]).epsilon(1e-6).margin(1e-8));
      };
      check(c.pre, b.grad_pre, "pre");
      check(c.weight_hh, summed_weight_gradient(b, s), "weight_hh");
      if (with_state) {
        check(c.h0, b.grad_h0, "h0");
        check(c.c0, b.grad_c0, "c0");
      }
    }
  }
}

TEST_CASE("the fused LSTM's scalar row bodies match the CPU's vector lanes bit for bit") {
  const LstmShape s{21, 9, 5};  // a tile of sixteen lanes and a partial one
  const Case c = random_case(s, 31);
  const auto as_float = [](const std::vector<double>& v) {
    return std::vector<float>(v.begin(), v.end());
  };
  const std::vector<float> pre = as_float(c.pre), w = as_float(c.weight_hh),
                           w_t = as_float(transposed(c.weight_hh, s.gates(), s.hidden)),
                           h0 = as_float(c.h0), c0 = as_float(c.c0), grad_y = as_float(c.grad_y),
                           grad_h = as_float(c.grad_h_last), grad_c = as_float(c.grad_c_last);
  ForwardBuffers<float> cpu(s), emulated(s);
  lstm_forward_cpu(forward_args(pre, w_t, h0, c0, true, cpu, true), s, 0, s.batch);
  const LstmForward<float> forward = forward_args(pre, w_t, h0, c0, true, emulated, true);
  for (int64_t n = 0; n < s.batch; ++n) lstm_forward_row(forward, s, n);
  CHECK(cpu.outputs == emulated.outputs);
  CHECK(cpu.cells == emulated.cells);
  CHECK(cpu.h_last == emulated.h_last);
  CHECK(cpu.c_last == emulated.c_last);

  BackwardBuffers<float> cpu_grads(s), emulated_grads(s);
  lstm_backward_cpu(backward_args(w, h0, c0, true, cpu, grad_y, grad_h, grad_c, cpu_grads), s, 0,
                    s.batch);
  const LstmBackward<float> backward =
      backward_args(w, h0, c0, true, cpu, grad_y, grad_h, grad_c, emulated_grads);
  for (int64_t n = 0; n < s.batch; ++n) lstm_backward_row(backward, s, n);
  CHECK(cpu_grads.grad_pre == emulated_grads.grad_pre);
  CHECK(cpu_grads.grad_weight == emulated_grads.grad_weight);
  CHECK(cpu_grads.grad_h0 == emulated_grads.grad_h0);
  CHECK(cpu_grads.grad_c0 == emulated_grads.grad_c0);
}

TEST_CASE("the fused LSTM on the CPU gives the same result split into ranges of batch rows") {
  const LstmShape s{5, 8, 3};
  const Case c = random_case(s, 41);
  const std::vector<double> w_t = transposed(c.weight_hh, s.gates(), s.hidden);
  ForwardBuffers<double> whole(s), split(s);
  lstm_forward_cpu(forward_args(c.pre, w_t, c.h0, c.c0, true, whole, true), s, 0, s.batch);
  const LstmForward<double> args = forward_args(c.pre, w_t, c.h0, c.c0, true, split, true);
  for (int64_t n = 0; n < s.batch; n += 2)
    lstm_forward_cpu(args, s, n, std::min<int64_t>(n + 2, s.batch));
  CHECK(whole.outputs == split.outputs);
  CHECK(whole.c_last == split.c_last);
}

TEST_CASE("without a GPU the fused LSTM's CUDA launchers fail with a message") {
  if (gpu_present()) return;
  const LstmShape s{1, 1, 1};
  float x[4] = {};
  const LstmForward<float> forward{x, x, nullptr, nullptr, x, nullptr, nullptr, x, x, x};
  const LstmBackward<float> backward{x,       nullptr, nullptr, x, x,       x,       x,
                                     nullptr, nullptr, x,       x, nullptr, nullptr, x};
  check_launch_fails(
      [&](const char** message) { return lstm_forward_cuda(forward, s, nullptr, message); });
  check_launch_fails(
      [&](const char** message) { return lstm_backward_cuda(backward, s, nullptr, message); });
}
