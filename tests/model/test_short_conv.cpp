// short_conv = K: a causal depthwise convolution and SiLU before gpt, linear_attention, deltanet
// and gated_deltanet; and deltanet's and gated_deltanet's qkv_conv = K, the same on each of q, k
// and v after its projection (flash-linear-attention's layout), with beta_bias = false. Checked
// against the layer written out with torch::conv1d (and the delta rule's reference), fused
// against reference, and for the properties every mixer has.

#include <catch2/catch.hpp>

#include "../support/process.h"
#include "model_harness.h"
#include "runtime/model/mixers/deltanet.h"
#include "runtime/model/serialize.h"
#include "runtime/ops/delta_rule/delta_rule.h"

using namespace memscript;
using memscript::test::make_decoder;
using memscript::test::random_tokens;
using memscript::test::relative_error;
using torch::indexing::Slice;

namespace {

const std::vector<std::string> kMixers = {"gpt", "linear_attention", "deltanet", "gated_deltanet"};
const MixerContext kContext{16, 2, 2};

Mixer short_conv_mixer(const std::string& name, int64_t kernel, const std::string& impl) {
  Options options("test mixer");
  options.set("short_conv", {kernel});
  options.set("impl", {impl});
  torch::manual_seed(3);
  Mixer mixer = make_mixer(name, kContext, options);
  options.finish();
  mixer->to(torch::kDouble);
  return mixer;
}

memscript::test::ExtraOptions with_conv(int64_t kernel) { return {{"short_conv", {kernel}}}; }

std::shared_ptr<DeltaNetMixerImpl> fla_deltanet(const std::string& impl) {
  Options options("test mixer");
  options.set("qkv_conv", {int64_t{4}});
  options.set("beta_bias", {false});
  options.set("impl", {impl});
  torch::manual_seed(3);
  auto mixer = std::dynamic_pointer_cast<DeltaNetMixerImpl>(
      make_mixer("deltanet", MixerContext{16, 2, 2}, options));
  options.finish();
  mixer->to(torch::kDouble);
  return mixer;
}

// silu(causal depthwise conv_K(x Wᵀ)) per channel, no bias, split into heads:
// [batch, heads, length, head_dim].
torch::Tensor convolved_heads(torch::OrderedDict<std::string, torch::Tensor>& parameters,
                              const std::string& name, const torch::Tensor& x) {
  const torch::Tensor projected =
      torch::linear(x, parameters[name + ".weight"]).transpose(1, 2);  // [B, C, L]
  const torch::Tensor weight = parameters[name + "_conv.weight"];      // [C, 1, K]
  const int64_t kernel = weight.size(2);
  const torch::Tensor padded = torch::constant_pad_nd(projected, {kernel - 1, 0}, 0.0);
  const std::vector<int64_t> one = {1}, none = {0};
  const torch::Tensor u =
      torch::silu(at::conv1d(padded, weight, {}, torch::IntArrayRef(one), torch::IntArrayRef(none),
                             torch::IntArrayRef(one), weight.size(0)));
  return u.transpose(1, 2).unflatten(-1, {2, -1}).transpose(1, 2);
}

}  // namespace

TEST_CASE("short_conv is the mixer of silu(causal depthwise conv(x)), fused as reference") {
  for (const std::string& name : kMixers) {
    INFO(name);
    const int64_t kernel = 4;
    const Mixer fused = short_conv_mixer(name, kernel, "fused");
    const Mixer reference = short_conv_mixer(name, kernel, "reference");
    CHECK(fused->config()["short_conv"] == kernel);
    CHECK(fused->config()["mixer"] == name);
    torch::manual_seed(5);
    const torch::Tensor x = torch::randn({2, 11, 16}, torch::kDouble);

    // The oracle: left-pad K − 1 zeros, convolve each channel, SiLU, then the inner mixer.
    std::shared_ptr<MixerImpl> inner;
    torch::Tensor weight, bias;
    for (const auto& child : fused->named_children())
      if (child.key() == "mixer") inner = std::dynamic_pointer_cast<MixerImpl>(child.value());
    for (const auto& parameter : fused->named_parameters()) {
      if (parameter.key() == "conv.weight") weight = parameter.value();
      if (parameter.key() == "conv.bias") bias = parameter.value();
    }
    REQUIRE(inner);
    REQUIRE(weight.sizes() == torch::IntArrayRef({16, 1, kernel}));
    const torch::Tensor padded = torch::constant_pad_nd(x.transpose(1, 2), {kernel - 1, 0}, 0.0);
    const std::vector<int64_t> one = {1}, none = {0};
    const torch::Tensor u =
        torch::silu(at::conv1d(padded, weight, bias, torch::IntArrayRef(one),
                               torch::IntArrayRef(none), torch::IntArrayRef(one), 16));
    const torch::Tensor expected = inner->forward(u.transpose(1, 2).contiguous(), MixerState{}).y;

    const MixerOutput out = fused->forward(x, MixerState{});
    CHECK(relative_error(out.y, expected) < 1e-12);
    CHECK(relative_error(reference->forward(x, MixerState{}).y, out.y) < 1e-12);
    // The window is the state's first tensor: the last K − 1 inputs, channels first.
    REQUIRE(out.state.tensors.size() >= 2);
    CHECK(torch::equal(out.state.tensors[0],
                       x.narrow(1, 11 - (kernel - 1), kernel - 1).transpose(1, 2)));
  }
}

TEST_CASE(
    "short_conv and qkv_conv: causal, the same in chunks shorter than their window, gradient "
    "everywhere, saved and loaded") {
  struct Case {
    std::string mixer;
    memscript::test::ExtraOptions options;
    std::string option;
    int convs;  // convolutions in the two layers
  };
  std::vector<Case> cases;
  for (const std::string& name : kMixers) cases.push_back({name, with_conv(4), "short_conv", 2});
  for (const char* name : {"deltanet", "gated_deltanet"})
    cases.push_back({name, memscript::test::fla_deltanet_options(4), "qkv_conv", 6});
  for (const Case& c : cases) {
    const std::string& name = c.mixer;
    const std::string& option = c.option;
    INFO(name << " " << option);
    Decoder model = make_decoder(name, 16, 2, 2, c.options);
    model->to(torch::kDouble);
    const torch::Tensor tokens = random_tokens(3, 29, 5);
    const torch::Tensor whole = model->forward(tokens);
    CHECK(torch::allclose(whole, memscript::test::chunked_logits(model, tokens, {1, 3, 13, 29}),
                          1e-9, 1e-9));

    torch::Tensor changed = tokens.clone();
    changed.index_put_({Slice(), 11}, (tokens.index({Slice(), 11}) + 1) % 4);
    const torch::Tensor other = model->forward(changed);
    CHECK(torch::allclose(whole.index({Slice(), Slice(0, 11)}),
                          other.index({Slice(), Slice(0, 11)}), 0, 1e-12));

    const torch::Tensor targets = torch::randint(0, 3, {3, 29}, torch::kInt64);
    masked_cross_entropy(whole, targets, torch::ones({3, 29}, torch::kBool)).backward();
    int convs = 0;
    for (const auto& item : model->named_parameters()) {
      INFO(item.key());
      const std::string& key = item.key();  // ...mixer.conv.weight, ...mixer.query_conv.weight
      convs += key.size() >= 11 && key.compare(key.size() - 11, 11, "conv.weight") == 0;
      REQUIRE(item.value().grad().defined());
      CHECK(item.value().grad().abs().sum().item<double>() > 0);
    }
    CHECK(convs == c.convs);

    memscript::test::TempDir folder;
    save_decoder(*model, folder.path() / "model.pt");
    Decoder loaded = load_decoder(folder.path() / "model.pt");
    CHECK(loaded->config() == model->config());
    CHECK(loaded->config()["layers"][0][option] == 4);
    CHECK(torch::equal(loaded->forward(tokens), model->forward(tokens)));
  }
}

TEST_CASE("short_conv leaves a mixer without it unchanged, and checks its value and mixer") {
  const Decoder plain = make_decoder("deltanet");
  CHECK_FALSE(plain->config()["layers"][0].contains("short_conv"));
  CHECK_THROWS_WITH(
      make_decoder("lstm", 16, 2, 2, with_conv(4)),
      Catch::Matchers::Contains("'short_conv' applies to deltanet, gated_deltanet, gla, "
                                "gpt, linear_attention, not lstm"));
  CHECK_THROWS_WITH(make_decoder("gpt", 16, 2, 2, with_conv(1)),
                    Catch::Matchers::Contains("'short_conv' must be"));
  CHECK_THROWS_WITH(make_decoder("gpt", 16, 2, 2, {{"short_conv", {2.5}}}),
                    Catch::Matchers::Contains("'short_conv' must be an integer, got 2.5"));
}

TEST_CASE("qkv_conv convolves q, k and v after their projections, fused as reference") {
  const auto fused = fla_deltanet("fused");
  const auto reference = fla_deltanet("reference");
  CHECK(fused->config()["qkv_conv"] == 4);
  CHECK(fused->config()["beta_bias"] == false);
  auto parameters = fused->named_parameters();
  CHECK_FALSE(parameters.contains("beta.bias"));
  CHECK_FALSE(parameters.contains("query_conv.bias"));
  REQUIRE(parameters["key_conv.weight"].sizes() == torch::IntArrayRef({16, 1, 4}));

  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({2, 11, 16}, torch::kDouble);
  const auto unit = [](const torch::Tensor& t) { return t / t.norm(2, -1, true); };
  const torch::Tensor q = unit(convolved_heads(parameters, "query", x));
  const torch::Tensor k = unit(convolved_heads(parameters, "key", x));
  const torch::Tensor v = convolved_heads(parameters, "value", x);
  const torch::Tensor beta = torch::sigmoid(torch::linear(x, parameters["beta.weight"]));
  const ops::DeltaRuleResult rule =
      ops::delta_rule_reference(q, k, v, beta.transpose(1, 2), {}, {});
  const torch::Tensor expected =
      torch::linear(rule.outputs.transpose(1, 2).flatten(2), parameters["output.weight"],
                    parameters["output.bias"]);

  const MixerOutput out = fused->forward(x, MixerState{});
  CHECK(relative_error(out.y, expected) < 1e-10);
  CHECK(relative_error(reference->forward(x, MixerState{}).y, out.y) < 1e-12);
  // The state: S, then the windows of q, k and v: their last K − 1 projections, channels first.
  REQUIRE(out.state.tensors.size() == 4);
  CHECK(relative_error(out.state.tensors[0], rule.state) < 1e-12);
  const torch::Tensor last_keys = torch::linear(x, parameters["key.weight"]).narrow(1, 8, 3);
  CHECK(relative_error(out.state.tensors[2], last_keys.transpose(1, 2)) < 1e-12);
}

TEST_CASE("qkv_conv and beta_bias are unwritten when off, and their values are checked") {
  const Decoder plain = make_decoder("deltanet");
  CHECK_FALSE(plain->config()["layers"][0].contains("qkv_conv"));
  CHECK_FALSE(plain->config()["layers"][0].contains("beta_bias"));
  CHECK_THROWS_WITH(make_decoder("deltanet", 16, 2, 2,
                                 {{"qkv_conv", {int64_t{4}}}, {"short_conv", {int64_t{4}}}}),
                    Catch::Matchers::Contains("'qkv_conv' and short_conv are two placements"));
  CHECK_THROWS_WITH(make_decoder("gated_deltanet", 16, 2, 2, {{"qkv_conv", {int64_t{1}}}}),
                    Catch::Matchers::Contains("'qkv_conv' must be"));
  CHECK_THROWS_WITH(make_decoder("deltanet", 16, 2, 2, {{"beta_bias", {int64_t{0}}}}),
                    Catch::Matchers::Contains("'beta_bias' must be"));
  CHECK_THROWS_WITH(make_decoder("linear_attention", 16, 2, 2, {{"qkv_conv", {int64_t{4}}}}),
                    Catch::Matchers::Contains("qkv_conv"));
}

TEST_CASE("xavier_gain draws the layer's projections Xavier-uniform, as flash-linear-attention") {
  const double gain = std::pow(2.0, -2.5);
  // Uniform in ±bound: every weight inside, the largest near it, the spread bound / sqrt(3).
  const auto check_xavier = [&](const torch::Tensor& weight, double tolerance) {
    const double bound =
        gain * std::sqrt(6.0 / static_cast<double>(weight.size(0) + weight.size(1)));
    const double largest = weight.abs().max().item<double>();
    CHECK(largest <= bound);
    CHECK(largest > 0.95 * bound);
    CHECK(weight.std().item<double>() == Approx(bound / std::sqrt(3.0)).epsilon(tolerance));
  };
  for (const char* mixer : {"deltanet", "gated_deltanet"}) {
    INFO(mixer);
    const Decoder model = make_decoder(mixer, 128, 4, 2, {{"xavier_gain", {gain}}});
    auto parameters = model->named_parameters();
    for (const char* layer : {"blocks.0.mixer.", "blocks.1.mixer."}) {
      INFO(layer);
      for (const char* name : {"query", "key", "value", "output"})
        check_xavier(parameters[std::string(layer) + name + ".weight"], 0.03);
      // β's 128 → 4 has 512 weights: a looser spread.
      check_xavier(parameters[std::string(layer) + "beta.weight"], 0.12);
      CHECK(parameters[std::string(layer) + "beta.bias"].abs().max().item<double>() == 0);
      CHECK(parameters[std::string(layer) + "output.bias"].abs().max().item<double>() == 0);
    }
    if (std::string(mixer) == "gated_deltanet")
      check_xavier(parameters["blocks.0.mixer.alpha.weight"], 0.12);
    // The rest of the decoder keeps its init: the MLP's first projection at 0.02.
    CHECK(parameters["blocks.0.mlp_up.weight"].std().item<double>() == Approx(0.02).epsilon(0.03));
    CHECK(model->config()["layers"][0]["xavier_gain"] == gain);

    // Without the option the projections stay normal(0, 0.02).
    const Decoder plain = make_decoder(mixer, 128, 4, 2);
    CHECK(plain->named_parameters()["blocks.0.mixer.query.weight"].std().item<double>() ==
          Approx(0.02).epsilon(0.03));
    CHECK_FALSE(plain->config()["layers"][0].contains("xavier_gain"));
  }
  // A saved model loads back with its option and its weights.
  Decoder model = make_decoder("deltanet", 16, 2, 2, {{"xavier_gain", {gain}}});
  memscript::test::TempDir folder;
  save_decoder(*model, folder.path() / "model.pt");
  Decoder loaded = load_decoder(folder.path() / "model.pt");
  CHECK(loaded->config() == model->config());
  const torch::Tensor tokens = random_tokens(2, 9, 4);
  CHECK(torch::equal(model->forward(tokens), loaded->forward(tokens)));

  CHECK_THROWS_WITH(make_decoder("deltanet", 16, 2, 2, {{"xavier_gain", {0.0}}}),
                    Catch::Matchers::Contains("'xavier_gain' = 0 would zero every projection"));
  CHECK_THROWS_WITH(make_decoder("deltanet", 16, 2, 2, {{"xavier_gain", {-1.0}}}),
                    Catch::Matchers::Contains("'xavier_gain' must be in [0, 100], got -1"));
  CHECK_THROWS_WITH(make_decoder("lstm", 16, 2, 2, {{"xavier_gain", {gain}}}),
                    Catch::Matchers::Contains("xavier_gain"));
}
