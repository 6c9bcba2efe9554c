// The fused qLSTM and minGRU cells (kernels/gated_scan/gated_scan.h): the CPU loop against the
// cells' equations written out with libm, its backward against finite differences, and the CUDA
// per-thread bodies, run over every block and thread, against the CPU loop bit for bit.

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernel_harness.h"
#include "kernels/common/block_sum.h"
#include "kernels/gated_scan/gated_scan.h"

using namespace memscript::kernels;
using memscript::kernels::test::cast;
using memscript::kernels::test::check_launch_fails;
using memscript::kernels::test::emulate_launch;
using memscript::kernels::test::gpu_present;
using memscript::kernels::test::numeric_gradient;
using memscript::kernels::test::random_values;
using memscript::kernels::test::require_close;
using memscript::kernels::test::weighted_sum;

namespace {

struct Case {
  GatedCellKind kind;
  GatedScanShape shape;
  bool negative;
  std::vector<double> pre, bias, initial;
};

Case random_case(GatedCellKind kind, GatedScanShape shape, bool negative, unsigned seed) {
  const auto slots = static_cast<size_t>(gated_slots(kind));
  const auto steps = static_cast<size_t>(shape.batch * shape.length * shape.hidden);
  return {kind,
          shape,
          negative,
          random_values(steps * slots, -2, 2, seed),
          kind == GatedCellKind::qlstm
              ? random_values(static_cast<size_t>(shape.hidden), -1, 1, seed + 1)
              : std::vector<double>{},
          random_values(static_cast<size_t>(shape.batch * shape.hidden), -1, 1, seed + 2)};
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

struct Outputs {
  std::vector<double> outputs, last;
};

// The cells' equations, one channel and step at a time, with libm's exp and tanh.
Outputs written_out(const Case& c, bool with_initial) {
  const auto [batch, length, hidden] = c.shape;
  const int64_t slots = gated_slots(c.kind);
  Outputs out{std::vector<double>(static_cast<size_t>(batch * length * hidden)),
              std::vector<double>(static_cast<size_t>(batch * hidden))};
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t ch = 0; ch < hidden; ++ch) {
      double state = with_initial ? c.initial[n * hidden + ch] : 0.0;
      for (int64_t t = 0; t < length; ++t) {
        const double* p = c.pre.data() + (n * length + t) * slots * hidden + ch;
        double output = 0;
        if (c.kind == GatedCellKind::qlstm) {
          const double s = sigmoid(p[0] + c.bias[ch] + 1);
          const double f = c.negative ? 2 * s - 1 : s;
          state = f * state + sigmoid(p[hidden]) * std::tanh(p[2 * hidden]);
          output = sigmoid(p[3 * hidden]) * std::tanh(state);
        } else {
          const double z = sigmoid(p[0]);
          state = (c.negative ? 1 - 2 * z : 1 - z) * state + z * p[hidden];
          output = state;
        }
        out.outputs[(n * length + t) * hidden + ch] = output;
      }
      out.last[n * hidden + ch] = state;
    }
  }
  return out;
}

template <typename T>
struct Buffers {
  std::vector<T> states, outputs, last;
  explicit Buffers(GatedScanShape s)
      : states(static_cast<size_t>(s.batch * s.length * s.hidden), T(-7)),
        outputs(states.size(), T(-7)),
        last(static_cast<size_t>(s.batch * s.hidden), T(-7)) {}
};

template <typename T>
GatedScanForward<T> forward_args(GatedCellKind kind, const std::vector<T>& pre,
                                 const std::vector<T>& bias, const std::vector<T>* initial,
                                 Buffers<T>& out, bool negative) {
  return {pre.data(),
          bias.empty() ? nullptr : bias.data(),
          initial ? initial->data() : nullptr,
          out.states.data(),
          kind == GatedCellKind::qlstm ? out.outputs.data() : nullptr,
          out.last.data(),
          negative};
}

// The CPU forward in double; for minGRU the outputs are the states.
Outputs cpu_forward(const Case& c, const std::vector<double>& pre, const std::vector<double>& bias,
                    const std::vector<double>* initial, Buffers<double>* keep = nullptr) {
  Buffers<double> out(c.shape);
  gated_scan_forward_cpu(c.kind, forward_args(c.kind, pre, bias, initial, out, c.negative), c.shape,
                         0, c.shape.batch);
  if (keep) *keep = out;
  return {c.kind == GatedCellKind::qlstm ? out.outputs : out.states, out.last};
}

// Hidden 4 (a width whose copies have a compile-time length) over several chunks,
// and a length at which the chunks prefetch (kPrefetchMinLength).
const GatedScanShape kShapes[] = {{1, 1, 1},   {2, 7, 3},  {3, 70, 5},
                                  {1, 33, 17}, {2, 70, 4}, {2, 600, 4}};

}  // namespace

TEST_CASE("the fused qLSTM and minGRU cells on the CPU match their written-out equations") {
  const GatedCellKind kind = GENERATE(GatedCellKind::qlstm, GatedCellKind::mingru);
  const bool negative = GENERATE(false, true);
  for (const GatedScanShape shape : kShapes) {
    for (const bool with_initial : {false, true}) {
      INFO("kind " << static_cast<int>(kind) << ", negative " << negative << ", shape "
                   << shape.batch << "x" << shape.length << "x" << shape.hidden << ", initial "
                   << with_initial);
      const Case c = random_case(kind, shape, negative, 11);
      const Outputs got = cpu_forward(c, c.pre, c.bias, with_initial ? &c.initial : nullptr);
      const Outputs expected = written_out(c, with_initial);
      require_close(got.outputs, expected.outputs, 1e-12);
      require_close(got.last, expected.last, 1e-12);
    }
  }
}

TEST_CASE("the fused cells' backward matches finite differences for every input") {
  const GatedCellKind kind = GENERATE(GatedCellKind::qlstm, GatedCellKind::mingru);
  const bool negative = GENERATE(false, true);
  for (const GatedScanShape shape : {GatedScanShape{1, 1, 1}, GatedScanShape{2, 5, 3},
                                     GatedScanShape{1, 40, 2}, GatedScanShape{1, 70, 4}}) {
    INFO("kind " << static_cast<int>(kind) << ", negative " << negative << ", length "
                 << shape.length);
    Case c = random_case(kind, shape, negative, 21);
    const auto steps = static_cast<size_t>(shape.batch * shape.length * shape.hidden);
    const std::vector<double> weights = random_values(steps, -1, 1, 22);
    const std::vector<double> last_weights =
        random_values(static_cast<size_t>(shape.batch * shape.hidden), -1, 1, 23);
    const auto loss = [&] {
      const Outputs out = cpu_forward(c, c.pre, c.bias, &c.initial);
      return weighted_sum(out.outputs, weights) + weighted_sum(out.last, last_weights);
    };
    Buffers<double> kept(shape);
    cpu_forward(c, c.pre, c.bias, &c.initial, &kept);
    std::vector<double> grad_pre(c.pre.size(), -7), grad_initial(c.initial.size(), -7);
    const GatedScanBackward<double> args{c.pre.data(),     c.bias.empty() ? nullptr : c.bias.data(),
                                         c.initial.data(), kept.states.data(),
                                         weights.data(),   last_weights.data(),
                                         grad_pre.data(),  grad_initial.data(),
                                         negative};
    gated_scan_backward_cpu(kind, args, shape, 0, shape.batch);
    require_close(grad_pre, numeric_gradient(c.pre, loss), 1e-7);
    require_close(grad_initial, numeric_gradient(c.initial, loss), 1e-7);
    if (kind == GatedCellKind::qlstm) {
      std::vector<double> grad_bias(c.bias.size());
      sum_blocks_cpu(grad_pre.data(), shape.batch * shape.length, shape.hidden, 4 * shape.hidden,
                     grad_bias.data());
      require_close(grad_bias, numeric_gradient(c.bias, loss), 1e-7);
    }
  }
}

TEST_CASE("the fused cells' CUDA bodies, run over every block and thread, match the CPU") {
  const GatedCellKind kind = GENERATE(GatedCellKind::qlstm, GatedCellKind::mingru);
  const bool negative = GENERATE(false, true);
  // More channels than one block holds, and a partial last block.
  const GatedScanShape shape{3, 45, 100};
  const Case c = random_case(kind, shape, negative, 31);
  const std::vector<float> pre = cast<float>(c.pre), bias = cast<float>(c.bias),
                           initial = cast<float>(c.initial);
  const int64_t blocks = gated_scan_blocks(shape);
  REQUIRE(blocks * kGatedScanThreadsPerBlock >= shape.batch * shape.hidden);

  Buffers<float> cpu(shape), emulated(shape);
  gated_scan_forward_cpu(kind, forward_args(kind, pre, bias, &initial, cpu, negative), shape, 0,
                         shape.batch);
  const GatedScanForward<float> emulated_args =
      forward_args(kind, pre, bias, &initial, emulated, negative);
  emulate_launch(blocks, kGatedScanThreadsPerBlock, [&](int64_t block, int64_t thread) {
    gated_scan_thread<float, float>(kind, emulated_args, shape, block, thread,
                                    kGatedScanThreadsPerBlock);
  });
  CHECK(emulated.states == cpu.states);
  CHECK(emulated.outputs == cpu.outputs);
  CHECK(emulated.last == cpu.last);

  const std::vector<float> grad_outputs = cast<float>(random_values(cpu.states.size(), -1, 1, 32));
  const std::vector<float> grad_last = cast<float>(random_values(initial.size(), -1, 1, 33));
  const auto backward = [&](bool emulate) {
    std::vector<float> grad_pre(pre.size(), -7.0f), grad_initial(initial.size(), -7.0f);
    const GatedScanBackward<float> args{pre.data(),
                                        bias.empty() ? nullptr : bias.data(),
                                        initial.data(),
                                        cpu.states.data(),
                                        grad_outputs.data(),
                                        grad_last.data(),
                                        grad_pre.data(),
                                        grad_initial.data(),
                                        negative};
    if (emulate) {
      emulate_launch(blocks, kGatedScanThreadsPerBlock, [&](int64_t block, int64_t thread) {
        gated_scan_backward_thread<float, float>(kind, args, shape, block, thread,
                                                 kGatedScanThreadsPerBlock);
      });
    } else {
      gated_scan_backward_cpu(kind, args, shape, 0, shape.batch);
    }
    return std::vector<std::vector<float>>{grad_pre, grad_initial};
  };
  CHECK(backward(true) == backward(false));
}

TEST_CASE(
    "the fused cells' CUDA bodies in bf16 keep a float state, the float kernel's bit for bit") {
  const GatedCellKind kind = GENERATE(GatedCellKind::qlstm, GatedCellKind::mingru);
  const GatedScanShape shape{2, 20, 6};
  const Case c = random_case(kind, shape, false, 41);
  const std::vector<float> pre = cast<float>(c.pre), bias = cast<float>(c.bias);
  std::vector<Bf16> pre16(pre.size()), bias16(bias.size());
  for (size_t i = 0; i < pre.size(); ++i) store(pre[i], &pre16[i]);
  for (size_t i = 0; i < bias.size(); ++i) store(bias[i], &bias16[i]);
  std::vector<float> pre_rounded(pre.size()), bias_rounded(bias.size());
  for (size_t i = 0; i < pre.size(); ++i) pre_rounded[i] = load(pre16[i]);
  for (size_t i = 0; i < bias.size(); ++i) bias_rounded[i] = load(bias16[i]);

  Buffers<float> expected(shape);
  gated_scan_forward_cpu(
      kind, forward_args<float>(kind, pre_rounded, bias_rounded, nullptr, expected, false), shape,
      0, shape.batch);
  const size_t steps = expected.states.size();
  // States stay float; the outputs are bf16 for both cells (minGRU's too, as their type differs).
  std::vector<float> states(steps), last(static_cast<size_t>(shape.batch * shape.hidden));
  std::vector<Bf16> outputs(steps);
  const GatedScanForward<Bf16> args{pre16.data(),   bias16.empty() ? nullptr : bias16.data(),
                                    nullptr,        states.data(),
                                    outputs.data(), last.data(),
                                    false};
  emulate_launch(gated_scan_blocks(shape), kGatedScanThreadsPerBlock, [&](int64_t b, int64_t t) {
    gated_scan_thread<Bf16, float>(kind, args, shape, b, t, kGatedScanThreadsPerBlock);
  });
  // The state runs in float from the same rounded inputs: bit for bit the float kernel's.
  CHECK(states == expected.states);
  CHECK(last == expected.last);
  const std::vector<float>& expected_out =
      kind == GatedCellKind::qlstm ? expected.outputs : expected.states;
  for (size_t i = 0; i < steps; ++i)  // rounded to bf16's 8 bits of mantissa on the way out
    CHECK(load(outputs[i]) == Approx(expected_out[i]).margin(1e-2).epsilon(1e-2));
}

TEST_CASE("the fused cells on the CPU give the same result split into ranges of batch rows") {
  const GatedCellKind kind = GENERATE(GatedCellKind::qlstm, GatedCellKind::mingru);
  const GatedScanShape shape{5, 9, 4};
  const Case c = random_case(kind, shape, true, 51);
  Buffers<double> whole(shape), split(shape);
  gated_scan_forward_cpu(kind, forward_args(kind, c.pre, c.bias, &c.initial, whole, true), shape, 0,
                         shape.batch);
  const GatedScanForward<double> args = forward_args(kind, c.pre, c.bias, &c.initial, split, true);
  for (int64_t n = 0; n < shape.batch; n += 2)
    gated_scan_forward_cpu(kind, args, shape, n, std::min<int64_t>(n + 2, shape.batch));
  CHECK(whole.states == split.states);
  CHECK(whole.last == split.last);
}

TEST_CASE("without a GPU the fused cells' CUDA launchers fail with a message") {
  if (gpu_present()) return;
  const GatedScanShape shape{1, 1, 1};
  float x = 0;
  const GatedScanForward<float> args{&x, nullptr, nullptr, &x, &x, nullptr, false};
  check_launch_fails([&](const char** message) {
    return gated_scan_forward_cuda(GatedCellKind::qlstm, args, shape, nullptr, message);
  });
}
