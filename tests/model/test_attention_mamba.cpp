// The gpt and mamba mixers' own checks: what the generic mixer tests cannot see because they
// run each mixer with its defaults (position kinds, max_length, negative eigenvalues), and the
// core computations against written-out formulas.

#include <catch2/catch.hpp>
#include <cmath>

#include "model_harness.h"
#include "runtime/model/mixers/gpt.h"
#include "runtime/model/mixers/mamba.h"
#include "runtime/ops/causal_attention/causal_attention.h"
#include "runtime/ops/selective_scan/selective_scan.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::chunked_logits;
using memscript::test::ExtraOptions;
using memscript::test::make_decoder;
using memscript::test::random_tokens;
using memscript::test::relative_error;
using torch::indexing::Slice;

namespace {

const auto kDouble = torch::TensorOptions().dtype(torch::kDouble);

OptionValue text(const std::string& value) { return {value}; }

// Changing token 11 leaves outputs 0..10 as they were and changes output 11.
void check_causal(Decoder& model) {
  const torch::Tensor tokens = random_tokens(2, 20, 3);
  torch::Tensor changed = tokens.clone();
  changed.index_put_({Slice(), 11}, (tokens.index({Slice(), 11}) + 1) % 4);
  const torch::Tensor a = model->forward(tokens);
  const torch::Tensor b = model->forward(changed);
  CHECK(torch::allclose(a.index({Slice(), Slice(0, 11)}), b.index({Slice(), Slice(0, 11)}), 0,
                        1e-12));
  CHECK_FALSE(torch::allclose(a.index({Slice(), 11}), b.index({Slice(), 11})));
}

// Three chunks give the outputs of one pass.
void check_chunked(Decoder& model) {
  const torch::Tensor tokens = random_tokens(3, 29, 5);
  const torch::Tensor chunked = chunked_logits(model, tokens, {13, 22, 29});
  CHECK(torch::allclose(model->forward(tokens), chunked, 1e-9, 1e-9));
}

Decoder double_decoder(const std::string& mixer, const ExtraOptions& extra) {
  Decoder model = make_decoder(mixer, 16, 2, 2, extra);
  model->to(torch::kDouble);
  return model;
}

// Element by element: query i sits at position p = total − length + i; key j > p is masked, and
// with slopes key j ≤ p loses slopes[h] · (p − j) (ALiBi).
torch::Tensor explicit_attention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const std::vector<double>& slopes = {}) {
  const int64_t length = q.size(2);
  const int64_t total = k.size(2);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(q.size(3)));
  for (int64_t i = 0; i < length; ++i) {
    const int64_t p = total - length + i;
    for (int64_t j = 0; j < total; ++j) {
      if (j > p) {
        scores.index_put_({Slice(), Slice(), i, j}, -INFINITY);
        continue;
      }
      for (size_t h = 0; h < slopes.size(); ++h) {
        const auto at = scores.index({Slice(), static_cast<int64_t>(h), i, j});
        scores.index_put_({Slice(), static_cast<int64_t>(h), i, j},
                          at - slopes[h] * static_cast<double>(p - j));
      }
    }
  }
  return torch::matmul(torch::softmax(scores, -1), v);
}

}  // namespace

TEST_CASE("gpt with learned positions refuses to run past max_length, naming the option") {
  Decoder model = make_decoder("gpt", 16, 2, 2, {{"max_length", {int64_t{8}}}});
  CHECK_NOTHROW(model->forward(random_tokens(2, 8, 1)));
  CHECK_THROWS_AS(model->forward(random_tokens(2, 9, 1)), UserError);
  CHECK_THROWS_WITH(model->forward(random_tokens(2, 9, 1)),
                    Contains("max_length") && Contains("8") && Contains("9") &&
                        Contains("sinusoidal") && Contains("rope"));
  // Chunks count too: 5 tokens, then 4 more, reach position 9.
  const DecoderOutput first = model->forward(random_tokens(2, 5, 1), DecoderState{});
  CHECK_THROWS_WITH(model->forward(random_tokens(2, 4, 2), first.state),
                    Contains("max_length") && Contains("raise max_length to at least 9"));
}

TEST_CASE("gpt without a table runs past max_length") {
  const std::string kind =
      GENERATE(as<std::string>{}, "none", "sinusoidal", "rope", "alibi", "relative");
  INFO(kind);
  Decoder model =
      make_decoder("gpt", 16, 2, 2, {{"positions", text(kind)}, {"max_length", {int64_t{8}}}});
  CHECK(model->forward(random_tokens(2, 20, 1)).size(1) == 20);
}

TEST_CASE("gpt rejects an unknown positions value and lists the valid ones") {
  CHECK_THROWS_WITH(make_decoder("gpt", 16, 2, 2, {{"positions", text("xpos")}}),
                    Contains("positions") && Contains("xpos") && Contains("none") &&
                        Contains("learned") && Contains("sinusoidal") && Contains("rope") &&
                        Contains("alibi") && Contains("relative"));
}

TEST_CASE("gpt rope needs an even head_dim") {
  CHECK_THROWS_WITH(
      make_decoder("gpt", 16, 2, 2, {{"positions", text("rope")}, {"head_dim", {int64_t{5}}}}),
      Contains("head_dim") && Contains("even"));
}

TEST_CASE("gpt with each kind of positions is causal and chunk-consistent") {
  const std::string kind =
      GENERATE(as<std::string>{}, "none", "learned", "sinusoidal", "rope", "alibi", "relative");
  INFO(kind);
  Decoder model = double_decoder("gpt", {{"positions", text(kind)}});
  check_causal(model);
  check_chunked(model);
}

TEST_CASE("gpt with its own head_dim keeps the shape and chunks") {
  Decoder model = double_decoder("gpt", {{"head_dim", {int64_t{3}}}});
  CHECK(model->forward(random_tokens(2, 7, 1)).sizes() == torch::IntArrayRef({2, 7, 3}));
  check_chunked(model);
}

TEST_CASE("causal_attention equals softmax(QKᵀ/sqrt(d) + mask) V, with and without a cache") {
  torch::manual_seed(4);
  const torch::Tensor q = torch::randn({2, 3, 4, 5}, kDouble);
  const torch::Tensor k = torch::randn({2, 3, 6, 5}, kDouble);
  const torch::Tensor v = torch::randn({2, 3, 6, 5}, kDouble);
  const torch::Tensor own_k = k.narrow(2, 2, 4);
  const torch::Tensor own_v = v.narrow(2, 2, 4);
  CHECK(torch::allclose(ops::causal_attention(q, own_k, own_v), explicit_attention(q, own_k, own_v),
                        1e-12, 1e-12));
  CHECK(torch::allclose(ops::causal_attention(q, k, v), explicit_attention(q, k, v), 1e-12, 1e-12));
}

TEST_CASE(
    "causal_attention with ALiBi slopes equals the bias written out, with and without a cache") {
  torch::manual_seed(8);
  const std::vector<double> slopes = {0.5, 0.03, 1.7};
  const torch::Tensor slope_tensor = torch::tensor(slopes, kDouble);
  // Head sizes 5 (the CPU kernel) and 16 (libtorch's attention with a float mask).
  for (const int64_t head_dim : {5, 16}) {
    INFO("head_dim " << head_dim);
    const torch::Tensor q = torch::randn({2, 3, 4, head_dim}, kDouble);
    const torch::Tensor k = torch::randn({2, 3, 6, head_dim}, kDouble);
    const torch::Tensor v = torch::randn({2, 3, 6, head_dim}, kDouble);
    for (const int64_t cached : {0, 2}) {
      INFO("cached " << cached);
      const torch::Tensor own_k = k.narrow(2, 2 - cached, 4 + cached);
      const torch::Tensor own_v = v.narrow(2, 2 - cached, 4 + cached);
      const torch::Tensor expected = explicit_attention(q, own_k, own_v, slopes);
      CHECK(torch::allclose(ops::causal_attention(q, own_k, own_v, slope_tensor), expected, 1e-12,
                            1e-12));
      CHECK(torch::allclose(ops::causal_attention_reference(q, own_k, own_v, slope_tensor),
                            expected, 1e-12, 1e-12));
      // The bias changes the output: it is not silently dropped.
      CHECK_FALSE(torch::allclose(expected, explicit_attention(q, own_k, own_v), 1e-3, 1e-3));
    }
  }
}

TEST_CASE("alibi_slopes are Press et al.'s, for a power of two and between") {
  // 8 heads: 2^-1 .. 2^-8. 6 heads: the 4 of 4 heads (2^-2, 2^-4, 2^-6, 2^-8), then the first
  // and third of 8 heads' (2^-1, 2^-3).
  const std::vector<double> eight = {0.5,     0.25,    0.125,    0.0625,
                                     1. / 32, 1. / 64, 1. / 128, 1. / 256};
  CHECK(torch::equal(ops::alibi_slopes(8), torch::tensor(eight, kDouble)));
  const std::vector<double> six = {0.25, 1. / 16, 1. / 64, 1. / 256, 0.5, 0.125};
  CHECK(torch::equal(ops::alibi_slopes(6), torch::tensor(six, kDouble)));
  CHECK(torch::equal(ops::alibi_slopes(1), torch::tensor(std::vector<double>{1. / 256}, kDouble)));
  CHECK_THROWS(ops::alibi_slopes(0));
}

TEST_CASE("causal_attention_reference equals softmax(QKᵀ/sqrt(d) + mask) V, with a cache") {
  torch::manual_seed(5);
  const torch::Tensor q = torch::randn({2, 3, 4, 5}, kDouble);
  const torch::Tensor k = torch::randn({2, 3, 6, 5}, kDouble);
  const torch::Tensor v = torch::randn({2, 3, 6, 5}, kDouble);
  CHECK(torch::allclose(ops::causal_attention_reference(q, k, v), explicit_attention(q, k, v),
                        1e-12, 1e-12));
}

namespace {

// Outputs and the gradients of Σ o ⊙ w for each input, through the kernel or the composed ops:
// q, k and v (with ALiBi's slopes where given), or q, k, v, q' and r (relative positions).
std::vector<torch::Tensor> attention_with_grads(const std::vector<torch::Tensor>& inputs,
                                                bool use_fused, const torch::Tensor& slopes = {}) {
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& x : inputs) leaves.push_back(x.detach().clone().requires_grad_());
  const auto& l = leaves;
  torch::Tensor out;
  if (leaves.size() == 5) {
    out = use_fused ? ops::causal_attention_relative_kernel(l[0], l[1], l[2], l[3], l[4])
                    : ops::causal_attention_relative_reference(l[0], l[1], l[2], l[3], l[4]);
  } else {
    out = use_fused ? ops::causal_attention_kernel(l[0], l[1], l[2], slopes)
                    : ops::causal_attention_reference(l[0], l[1], l[2], slopes);
  }
  torch::manual_seed(97);  // the same weights for both (randn_like would follow out's strides)
  (out * torch::randn(out.sizes(), out.options())).sum().backward();
  std::vector<torch::Tensor> results = {out.detach()};
  for (const torch::Tensor& leaf : leaves) results.push_back(leaf.grad());
  return results;
}

// q, k and v for `queries` queries after `cached` keys, 3 heads, batch 2; with relative
// positions q' and r too. The queries as strided head views of a projection, as the gpt mixer
// hands them over.
std::vector<torch::Tensor> attention_inputs(int64_t head_dim, int64_t queries, int64_t cached,
                                            torch::Dtype dtype, bool relative) {
  torch::manual_seed(6);
  const auto options = torch::TensorOptions().dtype(dtype);
  const int64_t keys = cached + queries;
  std::vector<torch::Tensor> inputs = {
      torch::randn({2, queries, 3, head_dim}, options).mul(2).transpose(1, 2),
      torch::randn({2, 3, keys, head_dim}, options), torch::randn({2, 3, keys, head_dim}, options)};
  if (relative) {
    inputs.push_back(torch::randn({2, queries, 3, head_dim}, options).transpose(1, 2));
    inputs.push_back(torch::randn({keys, 3, head_dim}, options).transpose(0, 1));
  }
  return inputs;
}

}  // namespace

TEST_CASE("fused causal attention matches the composed ops: outputs and gradients, with a cache") {
  const auto [dtype, tolerance] =
      GENERATE(std::make_pair(torch::kDouble, 1e-10), std::make_pair(torch::kFloat, 1e-5));
  // Head sizes with a compiled path (4, 16) and without (5); queries 1, 7 and 33 (a partial
  // tile, one and three tiles, whose lanes read relative distances past either end of the
  // table) after 0 or 3 cached keys; plain scores, ALiBi's bias, relative positions.
  const int64_t head_dim = GENERATE(4, 5, 16);
  const int64_t queries = GENERATE(1, 7, 33);
  const int64_t cached = GENERATE(0, 3);
  const std::string scores = GENERATE(as<std::string>{}, "plain", "alibi", "relative");
  INFO("dtype " << dtype << ", head_dim " << head_dim << ", queries " << queries << ", cached "
                << cached << ", " << scores);
  const auto inputs = attention_inputs(head_dim, queries, cached, dtype, scores == "relative");
  const torch::Tensor slopes = scores == "alibi" ? ops::alibi_slopes(3).to(dtype) : torch::Tensor();
  const auto fused_result = attention_with_grads(inputs, true, slopes);
  const auto reference = attention_with_grads(inputs, false, slopes);
  const char* names[] = {"out", "grad q", "grad k", "grad v", "grad q_position", "grad relative"};
  for (size_t i = 0; i < reference.size(); ++i) {
    INFO(names[i]);
    CHECK(relative_error(fused_result[i], reference[i]) < tolerance);
  }
}

TEST_CASE("relative attention refuses inputs of the wrong shape, naming what it expects") {
  const auto x = attention_inputs(4, 5, 2, torch::kDouble, true);
  CHECK_THROWS_WITH(
      ops::causal_attention_relative_kernel(x[0], x[1], x[2], x[3], x[4].narrow(1, 0, 5)),
      Contains("relative must be [heads, keys, head_dim] = [3, 7, 4]"));
  CHECK_THROWS_WITH(ops::causal_attention_relative_kernel(x[0], x[1], x[2], x[1], x[4]),
                    Contains("q_position must be like q"));
}

TEST_CASE("fused causal attention gives the same bits with one thread and two") {
  for (const bool relative : {false, true}) {
    INFO("relative " << relative);
    const auto inputs = attention_inputs(4, 40, 0, torch::kFloat, relative);
    const int before = at::get_num_threads();
    at::set_num_threads(1);
    const auto one = attention_with_grads(inputs, true);
    at::set_num_threads(2);
    const auto two = attention_with_grads(inputs, true);
    at::set_num_threads(before);
    for (size_t i = 0; i < one.size(); ++i) CHECK(torch::equal(one[i], two[i]));
  }
}

TEST_CASE("the gpt mixer, fused and reference, gives the same outputs and gradients") {
  const std::string positions = GENERATE(as<std::string>{}, "learned", "rope", "alibi", "relative");
  // Head size 4 runs the attention kernel, 16 libtorch's scaled_dot_product_attention (relative
  // positions: the kernel at both).
  const int64_t d_model = GENERATE(8, 32);
  INFO(positions << ", d_model " << d_model << " in 2 heads");
  std::vector<std::vector<torch::Tensor>> results;
  for (const char* impl : {"fused", "reference"}) {
    Decoder model =
        make_decoder("gpt", d_model, 2, 2, {{"positions", text(positions)}, {"impl", text(impl)}});
    model->to(torch::kDouble);
    const torch::Tensor tokens = random_tokens(3, 17, 9);
    const torch::Tensor logits = model->forward(tokens);
    (logits * logits.detach().cos()).sum().backward();
    std::vector<torch::Tensor> out = {logits.detach()};
    for (const auto& p : model->parameters()) out.push_back(p.grad());
    results.push_back(out);
  }
  REQUIRE(results[0].size() == results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    INFO("tensor " << i);
    CHECK(relative_error(results[0][i], results[1][i]) < 1e-9);
  }
}

TEST_CASE("the gpt mixer equals attention written out from its weights") {
  Options options("gpt test");
  options.set("positions", text("none"));
  const MixerContext context{6, 2, 1};
  Mixer mixer = make_mixer("gpt", context, options);
  mixer->to(torch::kDouble);
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({2, 4, 6}, kDouble);
  const auto parameters = mixer->named_parameters();
  const torch::Tensor qkv = torch::matmul(x, parameters["qkv.weight"].t()) + parameters["qkv.bias"];
  auto heads = [](const torch::Tensor& t) { return t.reshape({2, 4, 2, 3}).transpose(1, 2); };
  const torch::Tensor q = heads(qkv.narrow(2, 0, 6));
  const torch::Tensor k = heads(qkv.narrow(2, 6, 6));
  const torch::Tensor v = heads(qkv.narrow(2, 12, 6));
  const torch::Tensor merged = explicit_attention(q, k, v).transpose(1, 2).reshape({2, 4, 6});
  const torch::Tensor expected =
      torch::matmul(merged, parameters["output.weight"].t()) + parameters["output.bias"];
  CHECK(torch::allclose(mixer->forward(x), expected, 1e-12, 1e-12));
}

TEST_CASE(
    "gpt with relative positions equals Transformer-XL's scores written out from its weights") {
  const std::string impl = GENERATE(as<std::string>{}, "fused", "reference");
  INFO("impl " << impl);
  Options options("gpt test");
  options.set("positions", text("relative"));
  options.set("impl", text(impl));
  const int64_t d_model = 6, heads = 2, head_dim = 3, length = 5;
  const MixerContext context{d_model, heads, 1};
  Mixer mixer = make_mixer("gpt", context, options);
  mixer->to(torch::kDouble);
  torch::manual_seed(9);
  const torch::Tensor x = torch::randn({2, length, d_model}, kDouble);
  auto parameters = mixer->named_parameters();
  {
    // The biases start near zero; larger ones make a wrong sign or index visible.
    torch::NoGradGuard no_grad;
    parameters["content_bias"].normal_(0.0, 1.0);
    parameters["position_bias"].normal_(0.0, 1.0);
    parameters["relative.weight"].normal_(0.0, 1.0);
  }
  const torch::Tensor qkv = torch::matmul(x, parameters["qkv.weight"].t()) + parameters["qkv.bias"];
  const torch::Tensor u = parameters["content_bias"], w = parameters["position_bias"];
  const torch::Tensor W_r = parameters["relative.weight"];
  torch::Tensor merged = torch::zeros({2, length, d_model}, kDouble);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      auto part = [&](int64_t which, int64_t t) {
        return qkv[b][t].narrow(0, which * d_model + h * head_dim, head_dim);
      };
      for (int64_t i = 0; i < length; ++i) {
        std::vector<double> scores;
        for (int64_t j = 0; j <= i; ++j) {
          // R_d: sin(d / 10000^(2m/6)) at 2m, cos at 2m + 1.
          torch::Tensor R = torch::zeros({d_model}, kDouble);
          for (int64_t m = 0; m < d_model / 2; ++m) {
            const double angle = double(i - j) / std::pow(10000.0, 2.0 * m / d_model);
            R[2 * m] = std::sin(angle);
            R[2 * m + 1] = std::cos(angle);
          }
          const torch::Tensor relative_key =
              torch::matmul(W_r, R).narrow(0, h * head_dim, head_dim);
          const double s =
              ((part(0, i) + u[h]).dot(part(1, j)) + (part(0, i) + w[h]).dot(relative_key))
                  .item<double>();
          scores.push_back(s / std::sqrt(double(head_dim)));
        }
        const torch::Tensor p = torch::softmax(torch::tensor(scores, kDouble), 0);
        torch::Tensor o = torch::zeros({head_dim}, kDouble);
        for (int64_t j = 0; j <= i; ++j) o += p[j] * part(2, j);
        merged[b][i].narrow(0, h * head_dim, head_dim).copy_(o);
      }
    }
  }
  const torch::Tensor expected =
      torch::matmul(merged, parameters["output.weight"].t()) + parameters["output.bias"];
  CHECK(torch::allclose(mixer->forward(x), expected, 1e-12, 1e-12));
}

TEST_CASE("rope rotates pairs so that q·k depends only on the offset") {
  torch::manual_seed(6);
  const torch::Tensor q = torch::randn({1, 1, 1, 8}, kDouble);
  const torch::Tensor k = torch::randn({1, 1, 1, 8}, kDouble);
  auto dot = [&](int64_t m, int64_t n) {
    return (apply_rope(q, m, 10000.0) * apply_rope(k, n, 10000.0)).sum().item<double>();
  };
  CHECK(dot(7, 3) == Approx(dot(107, 103)).epsilon(1e-10));
  CHECK(dot(7, 3) != Approx(dot(7, 4)).epsilon(1e-6));
  CHECK(torch::allclose(apply_rope(q, 0, 10000.0), q));
  CHECK(apply_rope(q, 41, 10000.0).norm().item<double>() ==
        Approx(q.norm().item<double>()).epsilon(1e-12));
}

TEST_CASE("sinusoidal positions continue from an offset and handle an odd width") {
  const torch::Tensor whole = sinusoidal_positions(0, 9, 7, kDouble);
  CHECK(whole.sizes() == torch::IntArrayRef({9, 7}));
  CHECK(torch::allclose(whole.index({0, Slice(0, 7, 2)}), torch::zeros({4}, kDouble)));
  CHECK(torch::allclose(whole.index({0, Slice(1, 7, 2)}), torch::ones({3}, kDouble)));
  CHECK(torch::allclose(sinusoidal_positions(4, 5, 7, kDouble), whole.narrow(0, 4, 5)));
  CHECK(whole[3][0].item<double>() == Approx(std::sin(3.0)));
}

TEST_CASE("gpt and mamba report every resolved option") {
  Options gpt_options("gpt");
  const MixerContext context{16, 4, 2};
  const nlohmann::json gpt = make_mixer("gpt", context, gpt_options)->config();
  CHECK(gpt == nlohmann::json{{"mixer", "gpt"},
                              {"heads", 4},
                              {"head_dim", 4},
                              {"positions", "learned"},
                              {"max_length", 1024},
                              {"rope_base", 10000.0},
                              {"impl", "fused"}});
  Options mamba_options("mamba");
  const nlohmann::json mamba = make_mixer("mamba", context, mamba_options)->config();
  CHECK(mamba == nlohmann::json{{"mixer", "mamba"},
                                {"expand", 2},
                                {"d_inner", 32},
                                {"d_state", 16},
                                {"d_conv", 4},
                                {"dt_rank", 1},
                                {"negative_eigenvalues", false},
                                {"impl", "fused"}});
}

TEST_CASE("mamba's transition lies in (0, 1), or reaches into (-1, 0) with negative eigenvalues") {
  // ΔA over the range the block produces: Δ > 0 and A < 0, from tiny steps to long ones.
  const torch::Tensor delta_A = -torch::logspace(-6, 1.5, 200, 10, kDouble);
  const torch::Tensor positive = ops::mamba_transition(delta_A, false);
  CHECK(positive.gt(0).all().item<bool>());
  CHECK(positive.lt(1).all().item<bool>());
  const torch::Tensor signed_ = ops::mamba_transition(delta_A, true);
  CHECK(signed_.gt(-1).all().item<bool>());
  CHECK(signed_.lt(1).all().item<bool>());
  CHECK(signed_.min().item<double>() < -0.9);
  CHECK(torch::allclose(signed_, 2 * positive - 1));
}

TEST_CASE("mamba's selective scan equals the recurrence written out") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  torch::manual_seed(7);
  const int64_t batch = 2, length = 4, inner = 3, state = 2;
  const torch::Tensor x = torch::randn({batch, length, inner}, kDouble);
  const torch::Tensor delta = torch::rand({batch, length, inner}, kDouble) + 0.1;
  const torch::Tensor A = -torch::rand({inner, state}, kDouble) * 3 - 0.1;
  const torch::Tensor B = torch::randn({batch, length, state}, kDouble);
  const torch::Tensor C = torch::randn({batch, length, state}, kDouble);
  const torch::Tensor h0 = torch::randn({batch, inner, state}, kDouble);
  const ops::SelectiveScanResult scan =
      ops::selective_scan_reference(x, delta, A, B, C, h0, negative);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < inner; ++c) {
      std::vector<double> h(static_cast<size_t>(state));
      for (int64_t s = 0; s < state; ++s) h[size_t(s)] = h0[n][c][s].item<double>();
      for (int64_t t = 0; t < length; ++t) {
        const double d = delta[n][t][c].item<double>();
        double y = 0;
        for (int64_t s = 0; s < state; ++s) {
          double a = std::exp(d * A[c][s].item<double>());
          if (negative) a = 2 * a - 1;
          h[size_t(s)] =
              a * h[size_t(s)] + d * B[n][t][s].item<double>() * x[n][t][c].item<double>();
          y += C[n][t][s].item<double>() * h[size_t(s)];
        }
        CHECK(scan.y[n][t][c].item<double>() == Approx(y).epsilon(1e-12));
      }
      for (int64_t s = 0; s < state; ++s)
        CHECK(scan.h_last[n][c][s].item<double>() == Approx(h[size_t(s)]).epsilon(1e-12));
    }
  }
}

TEST_CASE("mamba with other options is causal and chunk-consistent") {
  const int64_t d_conv = GENERATE(int64_t{1}, int64_t{3});
  const bool negative = GENERATE(false, true);
  INFO("d_conv " << d_conv << ", negative_eigenvalues " << negative);
  Decoder model = double_decoder("mamba", {{"d_conv", {d_conv}},
                                           {"negative_eigenvalues", {negative}},
                                           {"d_state", {int64_t{4}}},
                                           {"expand", {int64_t{1}}},
                                           {"dt_rank", {int64_t{3}}}});
  check_causal(model);
  check_chunked(model);
}

TEST_CASE("mamba starts with step sizes in [1e-3, 1e-1] and A = -(1 .. d_state)") {
  Options options("mamba");
  Mixer mixer = make_mixer("mamba", MixerContext{16, 2, 2}, options);
  const auto parameters = mixer->named_parameters();
  const torch::Tensor dt = torch::softplus(parameters["dt_proj.bias"]);
  CHECK(dt.ge(1e-3 * 0.999).all().item<bool>());
  CHECK(dt.le(1e-1 * 1.001).all().item<bool>());
  const torch::Tensor A = -torch::exp(parameters["A_log"]);
  CHECK(torch::allclose(A[5], -torch::arange(1, 17, torch::kFloat)));
}
