// The fused ops around the recurrences (LayerNorm, the masked cross-entropy, the linear layer
// with its activations, the per-head L2 normalization) against the composed libtorch ops they
// replace: values and every gradient in float64 and float32, many blocks of rows, and the same
// bits at one thread and two.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "model_harness.h"
#include "runtime/ops/cross_entropy/cross_entropy.h"
#include "runtime/ops/embedding/embedding.h"
#include "runtime/ops/l2_normalize/l2_normalize.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"
#include "runtime/ops/mlp_block/mlp_block.h"
#include "runtime/torch.h"

using namespace memscript;
using memscript::test::relative_error;
using ops::LossReduction;

namespace {

struct LayerNormCase {
  torch::Tensor x, weight, bias;
};

LayerNormCase layer_norm_case(std::vector<int64_t> shape, torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto options = torch::TensorOptions().dtype(dtype);
  const int64_t width = shape.back();
  return {(torch::randn(shape, options) * 3 + 1).requires_grad_(),
          (torch::randn({width}, options) + 1).requires_grad_(),
          torch::randn({width}, options).requires_grad_()};
}

// y and the gradients of Σ y ⊙ w with respect to x, weight and bias.
std::vector<torch::Tensor> layer_norm_with_grads(const LayerNormCase& c, bool use_fused) {
  for (const torch::Tensor& t : {c.x, c.weight, c.bias}) t.mutable_grad() = torch::Tensor();
  const torch::Tensor y = use_fused ? ops::layer_norm(c.x, c.weight, c.bias, 1e-5)
                                    : ops::layer_norm_reference(c.x, c.weight, c.bias, 1e-5);
  torch::manual_seed(99);
  (y * torch::randn_like(y)).sum().backward();
  return {y.detach(), c.x.grad().clone(), c.weight.grad().clone(), c.bias.grad().clone()};
}

struct LossCase {
  torch::Tensor logits, targets, mask;
};

LossCase loss_case(int64_t batch, int64_t length, int64_t classes, torch::Dtype dtype,
                   uint64_t seed) {
  torch::manual_seed(seed);
  return {(torch::randn({batch, length, classes}, torch::TensorOptions().dtype(dtype)) * 2)
              .requires_grad_(),
          torch::randint(0, classes, {batch, length}, torch::kInt64),
          torch::rand({batch, length}) < 0.6};
}

std::pair<torch::Tensor, torch::Tensor> loss_with_grad(const LossCase& c, LossReduction reduction,
                                                       bool use_fused) {
  c.logits.mutable_grad() = torch::Tensor();
  const torch::Tensor loss =
      use_fused ? ops::masked_cross_entropy(c.logits, c.targets, c.mask, reduction)
                : ops::masked_cross_entropy_reference(c.logits, c.targets, c.mask, reduction);
  (loss * 1.5).backward();
  return {loss.detach(), c.logits.grad().clone()};
}

}  // namespace

TEST_CASE("fused layer norm matches the composed ops, values and gradients") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  const std::vector<int64_t> shape =
      GENERATE(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{2, 7, 5},
               std::vector<int64_t>{3, 70, 16}, std::vector<int64_t>{33, 4});
  INFO("dtype " << dtype << ", shape " << torch::IntArrayRef(shape));
  const LayerNormCase c = layer_norm_case(shape, dtype, 3);
  const auto fused = layer_norm_with_grads(c, true);
  const auto reference = layer_norm_with_grads(c, false);
  const char* names[] = {"y", "grad x", "grad weight", "grad bias"};
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO(names[i]);
    CHECK(fused[i].sizes() == reference[i].sizes());
    CHECK(relative_error(fused[i], reference[i]) < tolerance);
  }
}

TEST_CASE("fused layer norm reads a non-contiguous input and passes a tensor it cannot run") {
  const LayerNormCase c = layer_norm_case({5, 6}, torch::kDouble, 4);
  const torch::Tensor x = c.x.detach().t().contiguous().t();  // same values, column-major
  REQUIRE_FALSE(x.is_contiguous());
  CHECK(relative_error(ops::layer_norm(x, c.weight, c.bias, 1e-5),
                       ops::layer_norm_reference(x, c.weight, c.bias, 1e-5)) < 1e-12);
  // Half precision has no kernel: the composed ops run instead, with the same result.
  const torch::Tensor half = c.x.detach().to(torch::kBFloat16);
  const torch::Tensor w = c.weight.detach().to(torch::kBFloat16);
  const torch::Tensor b = c.bias.detach().to(torch::kBFloat16);
  CHECK(
      torch::equal(ops::layer_norm(half, w, b, 1e-5), ops::layer_norm_reference(half, w, b, 1e-5)));
}

TEST_CASE("fused layer norm gives the same bits with one thread and two") {
  const LayerNormCase c = layer_norm_case({20, 64, 9}, torch::kFloat, 5);  // 20 blocks of rows
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = layer_norm_with_grads(c, true);
  at::set_num_threads(2);
  const auto two = layer_norm_with_grads(c, true);
  at::set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) CHECK(torch::equal(one[i], two[i]));
}

TEST_CASE("fused masked cross-entropy matches the composed ops, mean and sum") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  const auto reduction = GENERATE(LossReduction::mean, LossReduction::sum);
  const auto [batch, length, classes] =
      GENERATE(std::make_tuple(1, 1, 2), std::make_tuple(3, 17, 5), std::make_tuple(4, 300, 3));
  INFO("dtype " << dtype << ", mean " << (reduction == LossReduction::mean) << ", shape " << batch
                << " x " << length << " x " << classes);
  LossCase c = loss_case(batch, length, classes, dtype, 6);
  c.mask.index_put_({0, 0}, true);  // at least one scored position
  const auto [loss, grad] = loss_with_grad(c, reduction, true);
  const auto [expected_loss, expected_grad] = loss_with_grad(c, reduction, false);
  CHECK(relative_error(loss, expected_loss) < tolerance);
  CHECK(relative_error(grad, expected_grad) < tolerance);
  CHECK(torch::all(grad.masked_select(~c.mask.unsqueeze(-1).expand_as(grad)) == 0).item<bool>());
}

TEST_CASE("fused masked cross-entropy with nothing scored is zero, with a zero gradient") {
  LossCase c = loss_case(2, 5, 3, torch::kDouble, 7);
  c.mask.fill_(false);
  const auto [loss, grad] = loss_with_grad(c, LossReduction::mean, true);
  CHECK(loss.item<double>() == 0.0);
  CHECK(torch::all(grad == 0).item<bool>());
}

TEST_CASE("fused masked cross-entropy is NaN when a scored row has a NaN or infinite logit") {
  const auto dtype = GENERATE(torch::kFloat, torch::kDouble);
  const double bad = GENERATE(std::nan(""), std::numeric_limits<double>::infinity());
  INFO("dtype " << dtype << ", logit " << bad);
  LossCase c = loss_case(2, 5, 3, dtype, 10);
  c.mask.fill_(true);
  torch::Tensor logits = c.logits.detach().clone();
  logits.index_put_({1, 3, 2}, bad);
  CHECK(std::isnan(
      ops::masked_cross_entropy(logits, c.targets, c.mask, LossReduction::mean).item<double>()));
  c.mask.index_put_({1, 3}, false);  // an unscored row is not read
  CHECK(std::isfinite(
      ops::masked_cross_entropy(logits, c.targets, c.mask, LossReduction::mean).item<double>()));
}

TEST_CASE("fused masked cross-entropy names a scored target outside the classes") {
  LossCase c = loss_case(2, 5, 3, torch::kFloat, 8);
  c.mask.fill_(true);
  c.targets.index_put_({1, 2}, 3);
  CHECK_THROWS_WITH(ops::masked_cross_entropy(c.logits, c.targets, c.mask, LossReduction::mean),
                    Catch::Contains("the target at position 7 is 3, outside [0, 3)"));
  c.mask.index_put_({1, 2}, false);  // unscored targets are not read
  CHECK_NOTHROW(ops::masked_cross_entropy(c.logits, c.targets, c.mask, LossReduction::mean));
}

TEST_CASE("fused masked cross-entropy gives the same bits with one thread and two") {
  const LossCase c = loss_case(32, 256, 3, torch::kFloat, 9);  // 32 blocks of rows
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = loss_with_grad(c, LossReduction::mean, true);
  at::set_num_threads(2);
  const auto two = loss_with_grad(c, LossReduction::mean, true);
  at::set_num_threads(before);
  CHECK(torch::equal(one.first, two.first));
  CHECK(torch::equal(one.second, two.second));
}

namespace {

// y and the gradients of Σ y ⊙ w for x, weight and bias, fused or through torch's linear.
std::vector<torch::Tensor> linear_with_grads(const torch::Tensor& x, const torch::Tensor& weight,
                                             const torch::Tensor& bias, ops::Activation activation,
                                             bool use_fused) {
  std::vector<torch::Tensor> leaves = {x, weight};
  if (bias.defined()) leaves.push_back(bias);
  for (const torch::Tensor& t : leaves) t.mutable_grad() = torch::Tensor();
  const torch::Tensor y =
      use_fused
          ? ops::linear(x, weight, bias, activation)
          : ops::activation_reference(torch::nn::functional::linear(x, weight, bias), activation);
  torch::manual_seed(98);
  (y * torch::randn_like(y)).sum().backward();
  std::vector<torch::Tensor> out = {y.detach()};
  for (const torch::Tensor& t : leaves) out.push_back(t.grad().clone());
  return out;
}

}  // namespace

TEST_CASE("fused linear matches torch's linear with every activation, values and gradients") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  const auto activation =
      GENERATE(ops::Activation::none, ops::Activation::gelu, ops::Activation::sigmoid,
               ops::Activation::elu_plus_one, ops::Activation::relu, ops::Activation::softplus,
               ops::Activation::silu);
  // 4 x 16 and 8 x 3 run on the small-weight kernel, 40 x 32 on libtorch's products.
  const auto [in, out] =
      GENERATE(std::make_pair(4, 16), std::make_pair(8, 3), std::make_pair(40, 32));
  const bool with_bias = GENERATE(true, false);
  INFO("dtype " << dtype << ", activation " << static_cast<int>(activation) << ", " << in << " -> "
                << out << ", bias " << with_bias);
  torch::manual_seed(12);
  const auto options = torch::TensorOptions().dtype(dtype);
  const torch::Tensor x = torch::randn({3, 300, in}, options).requires_grad_();
  const torch::Tensor weight = torch::randn({out, in}, options).requires_grad_();
  const torch::Tensor bias =
      with_bias ? torch::randn({out}, options).requires_grad_() : torch::Tensor();
  const auto fused_result = linear_with_grads(x, weight, bias, activation, true);
  const auto reference = linear_with_grads(x, weight, bias, activation, false);
  REQUIRE(fused_result.size() == reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    INFO("result " << i << " (y, grad x, grad weight, grad bias)");
    CHECK(fused_result[i].sizes() == reference[i].sizes());
    CHECK(relative_error(fused_result[i], reference[i]) < tolerance);
  }
}

TEST_CASE("fused activation node matches the composed activation, values and gradients") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  const auto activation =
      GENERATE(ops::Activation::gelu, ops::Activation::sigmoid, ops::Activation::elu_plus_one,
               ops::Activation::relu, ops::Activation::softplus, ops::Activation::silu);
  INFO("dtype " << dtype << ", activation " << static_cast<int>(activation));
  torch::manual_seed(15);
  // A transposed (non-contiguous) input, as the heads' feature map gets it.
  const torch::Tensor x =
      (3 * torch::randn({6, 50, 4}, torch::TensorOptions().dtype(dtype))).transpose(1, 2);
  const torch::Tensor weights = torch::randn_like(x);
  std::vector<torch::Tensor> results;
  for (const bool use_fused : {true, false}) {
    const torch::Tensor leaf = x.detach().requires_grad_();
    const torch::Tensor y =
        use_fused ? ops::activation(leaf, activation) : ops::activation_reference(leaf, activation);
    (y * weights).sum().backward();
    results.push_back(y.detach());
    results.push_back(leaf.grad());
  }
  CHECK(results[0].sizes() == x.sizes());
  CHECK(relative_error(results[0], results[2]) < tolerance);
  CHECK(relative_error(results[1], results[3]) < tolerance);
}

TEST_CASE("fused linear gives the same bits with one thread and two") {
  torch::manual_seed(13);
  const torch::Tensor x = torch::randn({32, 256, 4}).requires_grad_();
  const torch::Tensor weight = torch::randn({16, 4}).requires_grad_();
  const torch::Tensor bias = torch::randn({16}).requires_grad_();
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = linear_with_grads(x, weight, bias, ops::Activation::gelu, true);
  at::set_num_threads(2);
  const auto two = linear_with_grads(x, weight, bias, ops::Activation::gelu, true);
  at::set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) CHECK(torch::equal(one[i], two[i]));
}

TEST_CASE("fused linear with no rows gives an empty output and zero parameter gradients") {
  const torch::Tensor x = torch::randn({2, 0, 4}).requires_grad_();
  const torch::Tensor weight = torch::randn({16, 4}).requires_grad_();  // the small kernel's size
  const torch::Tensor bias = torch::randn({16}).requires_grad_();
  const torch::Tensor y = ops::linear(x, weight, bias);
  CHECK(y.sizes() == torch::IntArrayRef({2, 0, 16}));
  y.sum().backward();
  CHECK(torch::equal(weight.grad(), torch::zeros_like(weight)));
  CHECK(torch::equal(bias.grad(), torch::zeros_like(bias)));
}

TEST_CASE("fused embedding matches torch's embedding, values and weight gradient") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  torch::manual_seed(16);
  const torch::Tensor tokens = torch::randint(0, 7, {9, 500});  // 4500 rows: several blocks
  const torch::Tensor weights = torch::randn({9, 500, 3}, torch::TensorOptions().dtype(dtype));
  std::vector<torch::Tensor> results;
  for (const bool use_fused : {true, false}) {
    torch::manual_seed(17);
    const torch::Tensor leaf =
        torch::randn({7, 3}, torch::TensorOptions().dtype(dtype)).requires_grad_();
    const torch::Tensor y =
        use_fused ? ops::embedding(tokens, leaf) : torch::embedding(leaf, tokens);
    (y * weights).sum().backward();
    results.push_back(y.detach());
    results.push_back(leaf.grad());
  }
  CHECK(results[0].sizes() == torch::IntArrayRef({9, 500, 3}));
  CHECK(torch::equal(results[0], results[2]));
  CHECK(relative_error(results[1], results[3]) < tolerance);
}

TEST_CASE("fused embedding's weight gradient is the same bits with one thread and two") {
  torch::manual_seed(18);
  const torch::Tensor tokens = torch::randint(0, 5, {32, 256});
  const torch::Tensor weights = torch::randn({32, 256, 4});
  std::vector<torch::Tensor> grads;
  const int before = at::get_num_threads();
  for (const int threads : {1, 2}) {
    at::set_num_threads(threads);
    const torch::Tensor leaf = torch::ones({5, 4}).requires_grad_();
    (ops::embedding(tokens, leaf) * weights).sum().backward();
    grads.push_back(leaf.grad());
  }
  at::set_num_threads(before);
  CHECK(torch::equal(grads[0], grads[1]));
}

TEST_CASE("fused embedding refuses a token outside the vocabulary") {
  const torch::Tensor weight = torch::randn({4, 2}).requires_grad_();
  CHECK_THROWS(ops::embedding(torch::tensor({0, 4}), weight));
  CHECK_THROWS(ops::embedding(torch::tensor({-1}), weight));
}

namespace {

// y and the gradients of Σ y ⊙ weights with respect to x, m and every MLP weight.
std::vector<torch::Tensor> residual_mlp_with_grads(const torch::Tensor& x, const torch::Tensor& m,
                                                   int64_t hidden, bool use_fused) {
  torch::manual_seed(19);
  const auto options = x.options();
  const int64_t width = x.size(-1);
  std::vector<torch::Tensor> leaves = {x.detach().requires_grad_(),
                                       m.detach().requires_grad_(),
                                       (1 + 0.3 * torch::randn({width}, options)).requires_grad_(),
                                       (0.3 * torch::randn({width}, options)).requires_grad_(),
                                       torch::randn({hidden, width}, options).requires_grad_(),
                                       (0.3 * torch::randn({hidden}, options)).requires_grad_(),
                                       torch::randn({width, hidden}, options).requires_grad_(),
                                       (0.3 * torch::randn({width}, options)).requires_grad_()};
  const ops::MlpWeights w{leaves[2], leaves[3], 1e-5, leaves[4], leaves[5], leaves[6], leaves[7]};
  const torch::Tensor y = use_fused ? ops::residual_mlp(leaves[0], leaves[1], w)
                                    : ops::residual_mlp_reference(leaves[0], leaves[1], w);
  (y * torch::randn_like(y)).sum().backward();
  std::vector<torch::Tensor> out = {y.detach()};
  for (const torch::Tensor& leaf : leaves) out.push_back(leaf.grad());
  return out;
}

}  // namespace

TEST_CASE("fused residual MLP matches the separate ops, values and every gradient") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  // 4 -> 8 (the seed-mini MLP) and 5 -> 7 run the fused kernel; 64 -> 256 the separate ops.
  const auto [width, hidden] =
      GENERATE(std::make_pair(4, 8), std::make_pair(5, 7), std::make_pair(64, 256));
  INFO("dtype " << dtype << ", " << width << " -> " << hidden);
  torch::manual_seed(20);
  const auto options = torch::TensorOptions().dtype(dtype);
  const torch::Tensor x = torch::randn({3, 150, width}, options);
  const torch::Tensor m = torch::randn({3, 150, width}, options);
  const auto fused_result = residual_mlp_with_grads(x, m, hidden, true);
  const auto reference = residual_mlp_with_grads(x, m, hidden, false);
  const char* names[] = {
      "y",       "grad x",       "grad m",    "grad norm weight", "grad norm bias",
      "grad up", "grad up bias", "grad down", "grad down bias"};
  for (size_t i = 0; i < reference.size(); ++i) {
    INFO(names[i]);
    CHECK(fused_result[i].sizes() == reference[i].sizes());
    CHECK(relative_error(fused_result[i], reference[i]) < tolerance);
  }
}

TEST_CASE("fused residual MLP gives the same bits with one thread and two") {
  torch::manual_seed(22);
  const torch::Tensor x = torch::randn({32, 256, 4});
  const torch::Tensor m = torch::randn({32, 256, 4});
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = residual_mlp_with_grads(x, m, 8, true);
  at::set_num_threads(2);
  const auto two = residual_mlp_with_grads(x, m, 8, true);
  at::set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) CHECK(torch::equal(one[i], two[i]));
}

TEST_CASE("fused l2 normalization matches F.normalize, zero rows included") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-12), std::make_pair(torch::kFloat, 1e-5));
  torch::manual_seed(14);
  torch::Tensor x = torch::randn({5, 7, 3, 4}, torch::TensorOptions().dtype(dtype));
  x.index_put_({1, 2}, 0.0);  // three rows of zeros: the clamped branch
  const torch::Tensor weights = torch::randn_like(x);
  std::vector<torch::Tensor> results;
  for (const bool use_fused : {true, false}) {
    const torch::Tensor leaf = x.clone().requires_grad_();
    const torch::Tensor y = use_fused ? ops::l2_normalize(leaf) : ops::l2_normalize_reference(leaf);
    (y * weights).sum().backward();
    results.push_back(y.detach());
    results.push_back(leaf.grad());
  }
  CHECK(relative_error(results[0], results[2]) < tolerance);
  CHECK(relative_error(results[1], results[3]) < tolerance);
}
