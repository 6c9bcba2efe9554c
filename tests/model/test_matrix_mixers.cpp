// The matrix-state mixers' own checks: option errors, the delta rule against a recurrence
// written out by hand, β's range with and without negative eigenvalues, and linear attention's
// normalisation against its formula.

#include <catch2/catch.hpp>

#include "model_harness.h"
#include "runtime/model/mixers/deltanet.h"
#include "runtime/model/mixers/gated_deltanet.h"
#include "runtime/model/mixers/linear_attention.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/linear_attention/linear_attention.h"
#include "runtime/tasks/parity.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::make_decoder;

namespace {

const auto kDouble = torch::TensorOptions().dtype(torch::kDouble);

torch::Tensor matrix(std::initializer_list<double> values, int64_t rows, int64_t columns) {
  return torch::tensor(std::vector<double>(values), kDouble).reshape({rows, columns});
}

torch::Tensor vec(std::initializer_list<double> values) {
  return torch::tensor(std::vector<double>(values), kDouble);
}

// [length, width] for one batch and one head -> [1, 1, length, width].
torch::Tensor one_head(const torch::Tensor& x) { return x.unsqueeze(0).unsqueeze(0); }

template <typename T>
std::shared_ptr<T> make(const std::string& name, Options& options, uint64_t seed = 0) {
  torch::manual_seed(seed);
  const MixerContext context{16, 2, 2};
  auto mixer = std::dynamic_pointer_cast<T>(make_mixer(name, context, options));
  REQUIRE(mixer);
  options.finish();
  mixer->to(torch::kDouble);
  return mixer;
}

// Inputs big enough to push the gates toward their limits.
torch::Tensor large_inputs() {
  torch::manual_seed(3);
  return 50 * torch::randn({2, 40, 16}, kDouble);
}

}  // namespace

TEST_CASE("linear_attention names feature_map and its valid values when given an unknown one") {
  REQUIRE_THROWS_WITH(
      make_decoder("linear_attention", 16, 2, 2, {{"feature_map", {std::string("softmax")}}}),
      Contains("'feature_map'") && Contains("elu1, relu") && Contains("softmax"));
}

TEST_CASE("linear_attention rejects eps 0 and negative eps") {
  REQUIRE_THROWS_WITH(make_decoder("linear_attention", 16, 2, 2, {{"eps", {0.0}}}),
                      Contains("'eps'") && Contains("> 0"));
  REQUIRE_THROWS_WITH(make_decoder("linear_attention", 16, 2, 2, {{"eps", {-1e-3}}}),
                      Contains("'eps'"));
}

TEST_CASE("matrix mixers name head_dim and its range when it is 0") {
  const std::string mixer =
      GENERATE(as<std::string>{}, "linear_attention", "deltanet", "gated_deltanet");
  INFO(mixer);
  REQUIRE_THROWS_WITH(make_decoder(mixer, 16, 2, 2, {{"head_dim", {int64_t{0}}}}),
                      Contains("'head_dim'") && Contains("got 0"));
}

TEST_CASE("matrix mixers take head_dim apart from d_model / heads") {
  const std::string mixer =
      GENERATE(as<std::string>{}, "linear_attention", "deltanet", "gated_deltanet");
  INFO(mixer);
  Options options("test");
  options.set("head_dim", {int64_t{5}});
  auto mixer_module = make<MixerImpl>(mixer, options);
  CHECK(mixer_module->config().at("head_dim") == 5);
  CHECK(mixer_module->config().at("heads") == 2);
  const torch::Tensor x = torch::randn({3, 6, 16}, kDouble);
  CHECK(mixer_module->forward(x).sizes() == x.sizes());
}

TEST_CASE("matrix mixers report every resolved option in config") {
  Options none("test");
  CHECK(make<MixerImpl>("linear_attention", none)->config() ==
        nlohmann::json{{"mixer", "linear_attention"},
                       {"heads", 2},
                       {"head_dim", 8},
                       {"feature_map", "elu1"},
                       {"qk_norm", false},
                       {"eps", 1e-6},
                       {"impl", "fused"}});
  Options none_either("test");
  CHECK(make<MixerImpl>("gated_deltanet", none_either)->config() ==
        nlohmann::json{{"mixer", "gated_deltanet"},
                       {"heads", 2},
                       {"head_dim", 8},
                       {"negative_eigenvalues", false},
                       {"qk_norm", true},
                       {"impl", "fused"}});
}

TEST_CASE("deltanet's o_norm RMS-normalises each head's output before the projection") {
  // With the output projection the identity, the mixer returns its heads' outputs: o_norm's are
  // the plain mixer's, each head RMS-normalised over its 8 values and scaled per value channel.
  const std::string mixer = GENERATE(as<std::string>{}, "deltanet", "gated_deltanet");
  INFO(mixer);
  Options plain_options("test"), normed_options("test");
  normed_options.set("o_norm", {true});
  auto plain = make<MixerImpl>(mixer, plain_options, 7);
  auto normed = make<MixerImpl>(mixer, normed_options, 7);
  CHECK(normed->config().at("o_norm") == true);
  CHECK_FALSE(plain->config().contains("o_norm"));
  CHECK(normed->named_parameters().size() == plain->named_parameters().size() + 1);
  const torch::Tensor scale = torch::linspace(0.5, 2.0, 8, kDouble);
  {
    torch::NoGradGuard no_grad;
    for (auto* module : {plain.get(), normed.get()}) {
      module->named_parameters()["output.weight"].copy_(torch::eye(16, kDouble));
      module->named_parameters()["output.bias"].zero_();
    }
    normed->named_parameters()["output_norm"].copy_(scale);
  }
  const torch::Tensor x = torch::randn({3, 6, 16}, kDouble);
  const torch::Tensor heads = plain->forward(x).reshape({3, 6, 2, 8});
  const torch::Tensor expected = heads * torch::rsqrt(heads.square().mean(-1, true) + 1e-5) * scale;
  CHECK(torch::allclose(normed->forward(x), expected.reshape({3, 6, 16}), 0, 1e-12));
  normed->forward(x).square().sum().backward();
  CHECK(normed->named_parameters()["output_norm"].grad().abs().sum().item<double>() > 0);
}

TEST_CASE("the delta rule follows a three-step recurrence written out by hand") {
  // Step 1 writes v into the empty state along k = e1; step 2 overwrites column e2 entirely
  // (β = 1); step 3 corrects along a diagonal key.
  const torch::Tensor q = matrix({1, 0, 0, 1, 0.5, -1}, 3, 2);
  const torch::Tensor k = matrix({1, 0, 0, 1, 0.6, 0.8}, 3, 2);
  const torch::Tensor v = matrix({2, 3, 4, -2, 1, 1}, 3, 2);
  const torch::Tensor beta = vec({0.5, 1.0, 0.25});
  const torch::Tensor eye = torch::eye(2, kDouble);

  SECTION("without decay (deltanet)") {
    torch::Tensor s = torch::zeros({2, 2}, kDouble);
    std::vector<torch::Tensor> expected;
    for (int64_t t = 0; t < 3; ++t) {
      const torch::Tensor kt = k[t].reshape({2, 1}), vt = v[t].reshape({2, 1});
      s = s.mm(eye - beta[t] * kt.mm(kt.t())) + beta[t] * vt.mm(kt.t());
      if (t == 0) REQUIRE(torch::allclose(s, matrix({1, 0, 1.5, 0}, 2, 2)));
      if (t == 1) REQUIRE(torch::allclose(s, matrix({1, 4, 1.5, -2}, 2, 2)));
      expected.push_back(s.mv(q[t]));
    }
    const ops::DeltaRuleResult out = ops::delta_rule_reference(
        one_head(q), one_head(k), one_head(v), beta.reshape({1, 1, 3}), {}, {});
    CHECK(torch::allclose(out.outputs[0][0], torch::stack(expected), 0, 1e-12));
    CHECK(torch::allclose(out.state[0][0], s, 0, 1e-12));
  }

  SECTION("with decay (gated_deltanet), from a given state") {
    const torch::Tensor alpha = vec({0.9, 0.5, 0.75});
    const torch::Tensor initial = matrix({0.3, -0.1, 0.2, 0.4}, 2, 2);
    torch::Tensor s = initial;
    std::vector<torch::Tensor> expected;
    for (int64_t t = 0; t < 3; ++t) {
      const torch::Tensor kt = k[t].reshape({2, 1}), vt = v[t].reshape({2, 1});
      s = alpha[t] * s.mm(eye - beta[t] * kt.mm(kt.t())) + beta[t] * vt.mm(kt.t());
      expected.push_back(s.mv(q[t]));
    }
    const ops::DeltaRuleResult out =
        ops::delta_rule_reference(one_head(q), one_head(k), one_head(v), beta.reshape({1, 1, 3}),
                                  alpha.reshape({1, 1, 3}), initial.reshape({1, 1, 2, 2}));
    CHECK(torch::allclose(out.outputs[0][0], torch::stack(expected), 0, 1e-12));
    CHECK(torch::allclose(out.state[0][0], s, 0, 1e-12));
  }
}

TEST_CASE("the delta rule with decay 1 is the delta rule without decay") {
  torch::manual_seed(5);
  const torch::Tensor q = torch::randn({2, 3, 9, 4}, kDouble);
  const torch::Tensor k = torch::randn({2, 3, 9, 4}, kDouble);
  const torch::Tensor v = torch::randn({2, 3, 9, 5}, kDouble);
  const torch::Tensor beta = torch::rand({2, 3, 9}, kDouble);
  const ops::DeltaRuleResult plain = ops::delta_rule_reference(q, k, v, beta, {}, {});
  const ops::DeltaRuleResult gated =
      ops::delta_rule_reference(q, k, v, beta, torch::ones_like(beta), {});
  CHECK(torch::allclose(plain.outputs, gated.outputs, 0, 1e-12));
  CHECK(torch::allclose(plain.state, gated.state, 0, 1e-12));
}

TEST_CASE("a delta-rule step with beta above 1 flips the state's sign along the key") {
  // S = k kᵀ and v = 0: S (I − β k kᵀ) = (1 − β) k kᵀ, the transition's eigenvalue along k.
  const torch::Tensor k = vec({0.6, 0.8}).reshape({1, 1, 2});
  const torch::Tensor s = (k.unsqueeze(-1) * k.unsqueeze(-2));
  const torch::Tensor v = torch::zeros({1, 1, 2}, kDouble);
  const torch::Tensor next = ops::delta_rule_step(s, k, v, vec({1.5}).reshape({1, 1}));
  CHECK(torch::allclose(next, -0.5 * s, 0, 1e-12));
}

TEST_CASE("deltanet's beta lies in (0, 1), and in (0, 2) with negative_eigenvalues") {
  const std::string mixer = GENERATE(as<std::string>{}, "deltanet", "gated_deltanet");
  INFO(mixer);
  Options plain_options("test");
  Options negative_options("test");
  negative_options.set("negative_eigenvalues", {true});
  auto plain = make<DeltaNetMixerImpl>(mixer, plain_options);
  auto negative = make<DeltaNetMixerImpl>(mixer, negative_options);
  const torch::Tensor x = large_inputs();
  const torch::Tensor beta = plain->write_strength(x);
  const torch::Tensor doubled = negative->write_strength(x);
  REQUIRE(beta.sizes() == torch::IntArrayRef({2, 2, 40}));
  CHECK(beta.min().item<double>() > 0);
  CHECK(beta.max().item<double>() < 1);
  CHECK(doubled.min().item<double>() > 0);
  CHECK(doubled.max().item<double>() < 2);
  CHECK(doubled.max().item<double>() > 1);  // the range beyond 1 is reached, not just allowed
  CHECK(torch::allclose(doubled, 2 * beta, 0, 1e-12));
  CHECK(negative->config().at("negative_eigenvalues") == true);
}

TEST_CASE("gated_deltanet's decay lies in (0, 1), one per head and token") {
  Options options("test");
  auto mixer = make<GatedDeltaNetMixerImpl>("gated_deltanet", options);
  const torch::Tensor alpha = mixer->decay(large_inputs());
  REQUIRE(alpha.sizes() == torch::IntArrayRef({2, 2, 40}));
  CHECK(alpha.min().item<double>() > 0);
  CHECK(alpha.max().item<double>() < 1);
}

namespace {

// o_t = S_tᵀ φq_t / (z_tᵀ φq_t + eps), with S_t and z_t summed explicitly from a given start.
torch::Tensor explicit_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                        const torch::Tensor& v, torch::Tensor s, torch::Tensor z,
                                        double eps) {
  std::vector<torch::Tensor> outputs;
  for (int64_t t = 0; t < v.size(0); ++t) {
    s = s + phi_k[t].reshape({-1, 1}).mm(v[t].reshape({1, -1}));
    z = z + phi_k[t];
    outputs.push_back(s.t().mv(phi_q[t]) / (z.dot(phi_q[t]) + eps));
  }
  return torch::stack(outputs);
}

}  // namespace

TEST_CASE("linear attention normalises by z_t phi(q_t) + eps as its formula says") {
  const double eps = 1e-6;
  SECTION("three tokens from an empty state, by hand") {
    const torch::Tensor phi_q = matrix({1, 0, 0.5, 0.5, 0, 2}, 3, 2);
    const torch::Tensor phi_k = matrix({1, 0, 0, 1, 1, 1}, 3, 2);
    const torch::Tensor v = matrix({2, 4, -1, 3, 0, 6}, 3, 2);
    const ops::LinearAttentionResult out =
        ops::linear_attention_reference(one_head(phi_q), one_head(phi_k), one_head(v), {}, {}, eps);
    // t = 1: S = [[2, 4], [0, 0]], z = (1, 0): o = (2, 4) / (1 + eps).
    CHECK(torch::allclose(out.outputs[0][0][0], vec({2, 4}) / (1 + eps), 0, 1e-12));
    // t = 2: φq = (.5, .5) weighs both keys equally: the mean of v_1 and v_2.
    CHECK(torch::allclose(out.outputs[0][0][1], vec({0.5, 3.5}) / (1 + eps), 0, 1e-12));
    const torch::Tensor expected = explicit_linear_attention(
        phi_q, phi_k, v, torch::zeros({2, 2}, kDouble), torch::zeros({2}, kDouble), eps);
    CHECK(torch::allclose(out.outputs[0][0], expected, 0, 1e-12));
    CHECK(torch::allclose(out.sum[0][0], phi_k.t().mm(v), 0, 1e-12));
    CHECK(torch::allclose(out.normaliser[0][0], phi_k.sum(0), 0, 1e-12));
  }
  SECTION("a sequence longer than a block, from a given state") {
    torch::manual_seed(7);
    const torch::Tensor phi_q = torch::rand({150, 3}, kDouble);
    const torch::Tensor phi_k = torch::rand({150, 3}, kDouble);
    const torch::Tensor v = torch::randn({150, 4}, kDouble);
    const torch::Tensor s = torch::rand({3, 4}, kDouble);
    const torch::Tensor z = torch::rand({3}, kDouble);
    const ops::LinearAttentionResult out =
        ops::linear_attention_reference(one_head(phi_q), one_head(phi_k), one_head(v),
                                        s.reshape({1, 1, 3, 4}), z.reshape({1, 1, 3}), eps);
    CHECK(torch::allclose(out.outputs[0][0], explicit_linear_attention(phi_q, phi_k, v, s, z, eps),
                          0, 1e-10));
  }
}

TEST_CASE("linear attention's feature maps are elu + 1 and relu") {
  const torch::Tensor x = vec({-2, -0.5, 0, 1.5});
  Options elu_options("test");
  auto elu = make<LinearAttentionMixerImpl>("linear_attention", elu_options);
  const torch::Tensor phi = ops::activation_reference(x, elu->feature_map());
  CHECK(torch::allclose(phi, torch::elu(x) + 1, 0, 1e-12));
  CHECK(phi.min().item<double>() > 0);
  Options relu_options("test");
  relu_options.set("feature_map", {std::string("relu")});
  auto relu = make<LinearAttentionMixerImpl>("linear_attention", relu_options);
  CHECK(torch::allclose(ops::activation_reference(x, relu->feature_map()), vec({0, 0, 0, 1.5}), 0,
                        1e-12));
}

namespace {

// Mean parity-8 loss over the first and the last 20 of 400 AdamW steps, on the generic test's
// model (d_model 32, 2 heads, 2 layers) and batches.
std::pair<double, double> parity_loss_trend(const std::string& mixer,
                                            const memscript::test::ExtraOptions& extra) {
  torch::manual_seed(0);
  Decoder model = make_decoder(mixer, 32, 2, 2, extra);
  Options task_options("parity");
  const auto task = make_task("parity", task_options);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(3e-3).weight_decay(0));
  const int steps = 400;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    const HostBatch host = sample_host_batch(*task, 32, {8, 8}, static_cast<uint64_t>(step));
    const torch::Tensor inputs = torch::tensor(host.inputs).reshape({32, 8});
    const torch::Tensor targets = torch::tensor(host.targets).reshape({32, 8});
    optimizer.zero_grad();
    const torch::Tensor loss =
        masked_cross_entropy(model->forward(inputs), targets, torch::ones({32, 8}, torch::kBool));
    loss.backward();
    optimizer.step();
    if (step < 20) first += loss.item<double>() / 20;
    if (step >= steps - 20) last += loss.item<double>() / 20;
  }
  return {first, last};
}

}  // namespace

TEST_CASE("deltanet and gated_deltanet with negative_eigenvalues learn parity of length 8") {
  // What the option is for: with β in (0, 1) neither halves this loss in 400 steps; with the
  // transition's eigenvalue allowed below 0 the state can flip sign per 1 and parity is solved.
  const std::string mixer = GENERATE(as<std::string>{}, "deltanet", "gated_deltanet");
  INFO(mixer);
  const auto [first, last] = parity_loss_trend(mixer, {{"negative_eigenvalues", {true}}});
  INFO("loss " << first << " -> " << last);
  CHECK(last <= first / 10);
}
