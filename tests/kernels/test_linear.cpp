// The small-weight linear layer (kernels/linear/linear.h) against its sums written out, for the
// widths it has compiled paths for and for others, and over many blocks of rows.

#include <catch2/catch.hpp>

#include <vector>

#include "kernel_harness.h"
#include "kernels/common/block_sum.h"
#include "kernels/linear/linear.h"

using namespace memscript::kernels;
using memscript::kernels::test::random_values;
using memscript::kernels::test::require_close;

namespace {

struct Products {
  std::vector<double> y, grad_x, grad_weight, grad_bias;
};

// y = x Wᵀ + b, grad_x = g W, grad_W = gᵀ x, grad_b = Σ_rows g, as plain triple loops.
Products written_out(const std::vector<double>& x, const std::vector<double>& w,
                     const std::vector<double>& b, const std::vector<double>& g,
                     SmallLinearShape s) {
  Products p{std::vector<double>(static_cast<size_t>(s.rows * s.out)),
             std::vector<double>(static_cast<size_t>(s.rows * s.in)),
             std::vector<double>(static_cast<size_t>(s.out * s.in)),
             std::vector<double>(static_cast<size_t>(s.out))};
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t o = 0; o < s.out; ++o) {
      double sum = b[o];
      for (int64_t i = 0; i < s.in; ++i) sum += x[r * s.in + i] * w[o * s.in + i];
      p.y[r * s.out + o] = sum;
      p.grad_bias[o] += g[r * s.out + o];
      for (int64_t i = 0; i < s.in; ++i) {
        p.grad_x[r * s.in + i] += g[r * s.out + o] * w[o * s.in + i];
        p.grad_weight[o * s.in + i] += g[r * s.out + o] * x[r * s.in + i];
      }
    }
  }
  return p;
}

Products kernels_of(const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b, const std::vector<double>& g,
                    SmallLinearShape s) {
  const int64_t blocks = small_linear_blocks(s);
  Products p{std::vector<double>(static_cast<size_t>(s.rows * s.out), -7),
             std::vector<double>(static_cast<size_t>(s.rows * s.in), -7),
             std::vector<double>(static_cast<size_t>(s.out * s.in), -7),
             std::vector<double>(static_cast<size_t>(s.out), -7)};
  std::vector<double> weight_partials(static_cast<size_t>(blocks * s.out * s.in), -7);
  std::vector<double> bias_partials(static_cast<size_t>(blocks * s.out), -7);
  small_linear_forward_cpu(x.data(), w.data(), b.data(), ActivationKind::none, nullptr, p.y.data(),
                           s, 0, s.rows);
  small_linear_grad_input_cpu(g.data(), w.data(), p.grad_x.data(), s, 0, s.rows);
  small_linear_grad_params_cpu(g.data(), x.data(), weight_partials.data(), bias_partials.data(), s,
                               0, blocks);
  sum_blocks_cpu(weight_partials.data(), blocks, s.out * s.in, p.grad_weight.data());
  sum_blocks_cpu(bias_partials.data(), blocks, s.out, p.grad_bias.data());
  return p;
}

}  // namespace

TEST_CASE("the small linear kernels match the written-out products") {
  // Widths with a compiled path (1, 2, 3, 4, 8, 16, 32, 64) and without (5, 7, 12), rows across
  // several blocks and a partial last one.
  const auto [rows, in, out] =
      GENERATE(std::make_tuple(1, 1, 1), std::make_tuple(7, 4, 16), std::make_tuple(600, 16, 4),
               std::make_tuple(300, 8, 2), std::make_tuple(513, 5, 7), std::make_tuple(40, 64, 3),
               std::make_tuple(33, 3, 32), std::make_tuple(20, 12, 64));
  const SmallLinearShape s{rows, in, out};
  INFO("rows " << rows << ", in " << in << ", out " << out);
  const auto x = random_values(static_cast<size_t>(rows * in), -2, 2, 1);
  const auto w = random_values(static_cast<size_t>(out * in), -1, 1, 2);
  const auto b = random_values(static_cast<size_t>(out), -1, 1, 3);
  const auto g = random_values(static_cast<size_t>(rows * out), -1, 1, 4);
  const Products got = kernels_of(x, w, b, g, s);
  const Products expected = written_out(x, w, b, g, s);
  require_close(got.y, expected.y, 1e-12);
  require_close(got.grad_x, expected.grad_x, 1e-12);
  require_close(got.grad_weight, expected.grad_weight, 1e-12);
  require_close(got.grad_bias, expected.grad_bias, 1e-12);
}

TEST_CASE("the small linear forward without a bias, split into row ranges, gives the same bits") {
  const SmallLinearShape s{100, 4, 16};
  const auto x = random_values(static_cast<size_t>(s.rows * s.in), -2, 2, 5);
  const auto w = random_values(static_cast<size_t>(s.out * s.in), -1, 1, 6);
  std::vector<double> whole(static_cast<size_t>(s.rows * s.out)), split(whole.size());
  small_linear_forward_cpu(x.data(), w.data(), nullptr, ActivationKind::none, nullptr, whole.data(),
                           s, 0, s.rows);
  for (int64_t r = 0; r < s.rows; r += 7) {
    small_linear_forward_cpu(x.data(), w.data(), nullptr, ActivationKind::none, nullptr,
                             split.data(), s, r, std::min<int64_t>(r + 7, s.rows));
  }
  CHECK(whole == split);
  std::vector<double> zero_bias(static_cast<size_t>(s.out), 0.0), with_zero(whole.size());
  small_linear_forward_cpu(x.data(), w.data(), zero_bias.data(), ActivationKind::none, nullptr,
                           with_zero.data(), s, 0, s.rows);
  CHECK(whole == with_zero);
}

TEST_CASE("the small linear forward applies its activation and keeps the pre-activation") {
  const auto kind = GENERATE(ActivationKind::gelu, ActivationKind::sigmoid,
                             ActivationKind::elu_plus_one, ActivationKind::relu);
  INFO("activation " << static_cast<int>(kind));
  const SmallLinearShape s{37, 5, 6};  // two full tiles and a partial one
  const auto x = random_values(static_cast<size_t>(s.rows * s.in), -2, 2, 7);
  const auto w = random_values(static_cast<size_t>(s.out * s.in), -1, 1, 8);
  const auto b = random_values(static_cast<size_t>(s.out), -1, 1, 9);
  std::vector<double> plain(static_cast<size_t>(s.rows * s.out)), pre(plain.size(), -7),
      y(plain.size(), -7), activated(plain.size());
  small_linear_forward_cpu(x.data(), w.data(), b.data(), ActivationKind::none, nullptr,
                           plain.data(), s, 0, s.rows);
  small_linear_forward_cpu(x.data(), w.data(), b.data(), kind, pre.data(), y.data(), s, 0, s.rows);
  activation_forward_cpu(kind, plain.data(), activated.data(), s.rows * s.out);
  CHECK(pre == plain);
  CHECK(y == activated);
}

TEST_CASE("the block sum adds blocks in order, reads strided rows, and gives zeros for none") {
  // Three blocks of 2 numbers, in rows of 3 (the third column is not part of the sum).
  const std::vector<double> partials = {1, 2, 100, 10, 20, 100, 0.5, 0.25, 100};
  std::vector<double> sum(2, -1);
  sum_blocks_cpu(partials.data(), 3, 2, 3, sum.data());
  CHECK(sum == std::vector<double>{11.5, 22.25});
  const std::vector<double> contiguous = {1, 2, 10, 20};
  sum_blocks_cpu(contiguous.data(), 2, 2, sum.data());
  CHECK(sum == std::vector<double>{11, 22});
  sum_blocks_cpu(static_cast<const double*>(nullptr), 0, 2, sum.data());
  CHECK(sum == std::vector<double>{0, 0});
}
