// Mamba's fused causal conv + SiLU (kernels/causal_conv/causal_conv.h through
// ops::causal_conv_silu) against libtorch's Conv1d and SiLU (causal_conv_silu_reference): u, the
// window after, and the gradients of x, the window before, the weight and the bias, in float64 to
// 1e-9 and float32 to 1e-4; x as a slice of a wider array; chunks equal to one pass; the same bits
// at any thread count; and the inputs the kernel does not take falling back to the composed ops.

#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

#include "model_harness.h"
#include "runtime/ops/causal_conv/causal_conv.h"

using namespace memscript;
using memscript::test::require_close;

namespace {

struct Case {
  int64_t batch;
  int64_t length;
  int64_t channels;
  int64_t kernel;
  bool with_window;
  torch::Dtype dtype = torch::kDouble;
};

// The inputs as leaves: x is the first half of a [batch, length, 2 · channels] array, as Mamba's
// is of its input projection.
struct Inputs {
  torch::Tensor wide, window, weight, bias;
  torch::Tensor x() const { return wide.narrow(2, 0, weight.size(0)); }
};

Inputs inputs_of(const Case& c) {
  const auto options = torch::TensorOptions().dtype(c.dtype);
  torch::manual_seed(11);
  Inputs in;
  in.wide = torch::randn({c.batch, c.length, 2 * c.channels}, options).requires_grad_(true);
  if (c.with_window) {
    in.window = torch::randn({c.batch, c.channels, c.kernel - 1}, options).requires_grad_(true);
  }
  in.weight = (0.5 * torch::randn({c.channels, 1, c.kernel}, options)).requires_grad_(true);
  in.bias = (0.3 * torch::randn({c.channels}, options)).requires_grad_(true);
  return in;
}

struct Run {
  torch::Tensor u, after, grad_x, grad_rest, grad_window, grad_weight, grad_bias;
  std::string node;  // the name of u's autograd node
};

Run run(const Case& c, bool fused) {
  const Inputs in = inputs_of(c);
  const ops::CausalConvResult out =
      fused ? ops::causal_conv_silu(in.x(), in.window, in.weight, in.bias)
            : ops::causal_conv_silu_reference(in.x(), in.window, in.weight, in.bias);
  // Weights on both outputs, so that the window after has a gradient to pass on too.
  torch::manual_seed(13);
  torch::Tensor loss = (out.u * torch::randn_like(out.u)).sum();
  if (out.window_after.numel() > 0)
    loss = loss + (out.window_after * torch::randn_like(out.window_after)).sum();
  loss.backward();
  return {out.u.detach(),
          out.window_after.detach(),
          in.wide.grad().narrow(2, 0, c.channels),
          in.wide.grad().narrow(2, c.channels, c.channels),
          in.window.defined() ? in.window.grad() : torch::Tensor(),
          in.weight.grad(),
          in.bias.grad(),
          out.u.grad_fn() ? out.u.grad_fn()->name() : ""};
}

std::string describe(const Case& c) {
  return "batch " + std::to_string(c.batch) + ", length " + std::to_string(c.length) +
         ", channels " + std::to_string(c.channels) + ", kernel " + std::to_string(c.kernel) +
         (c.with_window ? ", from a window" : "");
}

void compare(const Case& c, double tolerance) {
  INFO(describe(c));
  const Run f = run(c, true), r = run(c, false);
  CHECK(f.node.find("CausalConvFunction") != std::string::npos);
  require_close(f.u, r.u, tolerance, "u");
  require_close(f.after, r.after, tolerance, "window after");
  require_close(f.grad_x, r.grad_x, tolerance, "grad x");
  require_close(f.grad_window, r.grad_window, tolerance, "grad window");
  require_close(f.grad_weight, r.grad_weight, tolerance, "grad weight");
  require_close(f.grad_bias, r.grad_bias, tolerance, "grad bias");
  // The rest of the wide array is not the conv's input.
  CHECK(f.grad_rest.abs().max().item<double>() == 0.0);
}

}  // namespace

TEST_CASE("the fused causal conv matches Conv1d + SiLU in float64, every gradient") {
  // Batch 1; lengths 1 and 2 (shorter than the window), odd, longer; kernels 1 (no window), 3, 4.
  for (const auto& [batch, length, channels, kernel] : std::vector<std::array<int64_t, 4>>{
           {1, 1, 3, 3}, {2, 2, 5, 4}, {3, 7, 20, 3}, {2, 33, 8, 4}, {2, 5, 4, 1}}) {
    for (const bool with_window : {false, true}) {
      compare({batch, length, channels, kernel, with_window}, 1e-9);
    }
  }
}

TEST_CASE("the fused causal conv matches Conv1d + SiLU in float32 to 1e-4") {
  compare({4, 40, 32, 3, true, torch::kFloat}, 1e-4);
}

TEST_CASE("the fused causal conv fed in chunks gives the one-pass outputs to the bit") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({3, 11, 6}, torch::kDouble);
  const torch::Tensor weight = torch::randn({6, 1, 4}, torch::kDouble);
  const torch::Tensor bias = torch::randn({6}, torch::kDouble);
  const auto whole = ops::causal_conv_silu(x, {}, weight, bias);
  // A chunk shorter than the window in the middle.
  const auto a = ops::causal_conv_silu(x.narrow(1, 0, 5), {}, weight, bias);
  const auto b = ops::causal_conv_silu(x.narrow(1, 5, 2), a.window_after, weight, bias);
  const auto c = ops::causal_conv_silu(x.narrow(1, 7, 4), b.window_after, weight, bias);
  CHECK(torch::equal(torch::cat({a.u, b.u, c.u}, 1), whole.u));
  CHECK(torch::equal(c.window_after, whole.window_after));
}

TEST_CASE("the fused causal conv gives the same bits with one thread and two") {
  const int kept = at::get_num_threads();
  std::vector<Run> runs;
  for (const int threads : {1, 2}) {
    at::set_num_threads(threads);
    runs.push_back(run({9, 300, 64, 4, true, torch::kFloat}, true));
  }
  at::set_num_threads(kept);
  CHECK(torch::equal(runs[0].u, runs[1].u));
  CHECK(torch::equal(runs[0].grad_x, runs[1].grad_x));
  CHECK(torch::equal(runs[0].grad_window, runs[1].grad_window));
  CHECK(torch::equal(runs[0].grad_weight, runs[1].grad_weight));
  CHECK(torch::equal(runs[0].grad_bias, runs[1].grad_bias));
}

TEST_CASE("the fused causal conv runs its reference where its kernel does not take the tensors") {
  torch::manual_seed(8);
  const torch::Tensor weight = torch::randn({4, 1, 3});
  const torch::Tensor bias = torch::randn({4});
  const auto same_as_reference = [&](const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& b) {
    const ops::CausalConvResult op = ops::causal_conv_silu(x, {}, w, b);
    const ops::CausalConvResult reference = ops::causal_conv_silu_reference(x, {}, w, b);
    return torch::equal(op.u, reference.u) && torch::equal(op.window_after, reference.window_after);
  };
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  CHECK(same_as_reference(bf16(torch::randn({2, 5, 4})), bf16(weight), bf16(bias)));
  CHECK(same_as_reference(torch::randn({2, 0, 4}), weight, bias));
  // Channels not contiguous: a transposed view.
  CHECK(same_as_reference(torch::randn({2, 4, 5}).transpose(1, 2), weight, bias));
}

TEST_CASE("the fused causal conv names a weight, bias or window of the wrong shape") {
  const torch::Tensor x = torch::randn({2, 5, 4});
  const torch::Tensor weight = torch::randn({4, 1, 3}), bias = torch::randn({4});
  CHECK_THROWS_WITH(ops::causal_conv_silu(x, {}, torch::randn({5, 1, 3}), bias),
                    Catch::Contains("the weight must be [4, 1, K], got [5, 1, 3]"));
  CHECK_THROWS_WITH(ops::causal_conv_silu(x, {}, weight, torch::randn({3})),
                    Catch::Contains("the bias must be [4], got [3]"));
  CHECK_THROWS_WITH(ops::causal_conv_silu(x, torch::randn({2, 4, 3}), weight, bias),
                    Catch::Contains("the window must be [2, 4, 2], got [2, 4, 3]"));
}
