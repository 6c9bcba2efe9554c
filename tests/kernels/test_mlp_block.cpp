// The fused MLP half of a decoder block (kernels/mlp_block/mlp_block.h): the forward against its
// formula written out with libm, the backward against finite differences of that formula, and block
// ranges that must not change a bit.

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernel_harness.h"
#include "kernels/common/block_sum.h"
#include "kernels/mlp_block/mlp_block.h"

using namespace memscript::kernels;
using memscript::kernels::test::numeric_gradient;
using memscript::kernels::test::random_values;
using memscript::kernels::test::require_close;
using memscript::kernels::test::weighted_sum;

namespace {

struct Case {
  MlpBlockShape shape;
  double eps = 1e-5;
  std::vector<double> x, m, norm_weight, norm_bias, up_weight, up_bias, down_weight, down_bias;
};

Case random_case(MlpBlockShape s, unsigned seed) {
  const auto values = [&](int64_t count, double low, double high) {
    return random_values(static_cast<size_t>(count), low, high, seed++);
  };
  Case c;
  c.shape = s;
  c.x = values(s.rows * s.width, -2, 2);
  c.m = values(s.rows * s.width, -1, 1);
  c.norm_weight = values(s.width, 0.5, 1.5);
  c.norm_bias = values(s.width, -0.5, 0.5);
  c.up_weight = values(s.hidden * s.width, -1, 1);
  c.up_bias = values(s.hidden, -0.5, 0.5);
  c.down_weight = values(s.width * s.hidden, -1, 1);
  c.down_bias = values(s.width, -0.5, 0.5);
  return c;
}

// y = h + W_down gelu(W_up LN(h) + b_up) + b_down, h = x + m, one row at a time with libm.
std::vector<double> written_out(const Case& c) {
  const auto [rows, width, hidden] = c.shape;
  std::vector<double> y(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> h(static_cast<size_t>(width)), n(h.size()), g(static_cast<size_t>(hidden));
    double mean = 0, variance = 0;
    for (int64_t i = 0; i < width; ++i) h[i] = c.x[r * width + i] + c.m[r * width + i];
    for (const double v : h) mean += v / static_cast<double>(width);
    for (const double v : h) variance += (v - mean) * (v - mean) / static_cast<double>(width);
    for (int64_t i = 0; i < width; ++i)
      n[i] = (h[i] - mean) / std::sqrt(variance + c.eps) * c.norm_weight[i] + c.norm_bias[i];
    for (int64_t j = 0; j < hidden; ++j) {
      double a = c.up_bias[j];
      for (int64_t i = 0; i < width; ++i) a += c.up_weight[j * width + i] * n[i];
      g[j] = 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
    }
    for (int64_t i = 0; i < width; ++i) {
      double out = h[i] + c.down_bias[i];
      for (int64_t j = 0; j < hidden; ++j) out += c.down_weight[i * hidden + j] * g[j];
      y[r * width + i] = out;
    }
  }
  return y;
}

MlpBlockWeights<double> weights_of(const Case& c) {
  return {c.norm_weight.data(), c.norm_bias.data(), c.eps, c.up_weight.data(), c.up_bias.data(),
          c.down_weight.data(), c.down_bias.data()};
}

struct Run {
  std::vector<double> h, y, mean, rstd, grad_h, grads;  // grads: the parameters', summed
};

// Forward over rows in ranges of `row_split`, backward over blocks in ranges of `block_split`.
Run run_kernels(const Case& c, const std::vector<double>& grad_y, int64_t row_split,
                int64_t block_split) {
  const MlpBlockShape s = c.shape;
  const auto size = static_cast<size_t>(s.rows * s.width);
  Run run{std::vector<double>(size, -7),
          std::vector<double>(size, -7),
          std::vector<double>(static_cast<size_t>(s.rows), -7),
          std::vector<double>(static_cast<size_t>(s.rows), -7),
          std::vector<double>(size, -7),
          std::vector<double>(static_cast<size_t>(mlp_block_parameter_count(s)), -7)};
  const MlpBlockForward<double> f{weights_of(c), c.x.data(),      c.m.data(),     run.h.data(),
                                  run.y.data(),  run.mean.data(), run.rstd.data()};
  for (int64_t r = 0; r < s.rows; r += row_split)
    mlp_block_forward_cpu(f, s, r, std::min(s.rows, r + row_split));
  const int64_t blocks = mlp_block_blocks(s);
  std::vector<double> partials(static_cast<size_t>(blocks * mlp_block_parameter_count(s)), -7);
  const MlpBlockBackward<double> b{weights_of(c),   run.h.data(),  run.mean.data(),
                                   run.rstd.data(), grad_y.data(), run.grad_h.data(),
                                   partials.data()};
  for (int64_t k = 0; k < blocks; k += block_split)
    mlp_block_backward_cpu(b, s, k, std::min(blocks, k + block_split));
  sum_blocks_cpu(partials.data(), blocks, mlp_block_parameter_count(s), run.grads.data());
  return run;
}

}  // namespace

TEST_CASE("the fused MLP block matches its formula written out, forward and backward") {
  // A partial tile; a full block and a partial one; a width without a fixed transpose.
  const MlpBlockShape shape =
      GENERATE(MlpBlockShape{5, 4, 8}, MlpBlockShape{300, 4, 8}, MlpBlockShape{40, 5, 7});
  INFO("rows " << shape.rows << ", width " << shape.width << ", hidden " << shape.hidden);
  Case c = random_case(shape, 11);
  const std::vector<double> grad_y =
      random_values(static_cast<size_t>(shape.rows * shape.width), -1, 1, 99);
  const Run run = run_kernels(c, grad_y, shape.rows, mlp_block_blocks(shape));
  require_close(run.y, written_out(c), 1e-12);
  for (int64_t i = 0; i < shape.rows * shape.width; ++i) REQUIRE(run.h[i] == c.x[i] + c.m[i]);

  // The loss Σ grad_y · y, differentiated numerically in every input.
  const auto loss = [&] { return weighted_sum(written_out(c), grad_y); };
  require_close(run.grad_h, numeric_gradient(c.x, loss), 1e-6);
  require_close(run.grad_h, numeric_gradient(c.m, loss), 1e-6);
  std::vector<double> expected;
  for (std::vector<double>* parameter :
       {&c.norm_weight, &c.norm_bias, &c.up_weight, &c.up_bias, &c.down_weight, &c.down_bias}) {
    const std::vector<double> g = numeric_gradient(*parameter, loss);
    expected.insert(expected.end(), g.begin(), g.end());
  }
  require_close(run.grads, expected, 1e-6);
}

TEST_CASE("the fused MLP block gives the same bits split into row and block ranges") {
  const Case c = random_case({1100, 4, 8}, 21);  // five blocks, the last partial
  const std::vector<double> grad_y = random_values(c.x.size(), -1, 1, 98);
  const Run whole = run_kernels(c, grad_y, c.shape.rows, mlp_block_blocks(c.shape));
  const Run split = run_kernels(c, grad_y, 37, 2);
  CHECK(split.y == whole.y);
  CHECK(split.grad_h == whole.grad_h);
  CHECK(split.grads == whole.grads);
}
