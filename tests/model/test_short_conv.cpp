// short_conv = K: a causal depthwise convolution and SiLU before gpt, linear_attention, deltanet
// and gated_deltanet. Checked against the convolution written out with torch::conv1d, fused
// against reference, and for the properties every mixer has.

#include <catch2/catch.hpp>

#include "../support/process.h"
#include "model_harness.h"
#include "runtime/model/serialize.h"

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
    "short_conv: causal, the same in chunks shorter than its window, gradient everywhere, "
    "saved and loaded") {
  for (const std::string& name : kMixers) {
    INFO(name);
    Decoder model = make_decoder(name, 16, 2, 2, with_conv(4));
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
    bool saw_conv = false;
    for (const auto& item : model->named_parameters()) {
      INFO(item.key());
      saw_conv = saw_conv || item.key().find(".conv.weight") != std::string::npos;
      REQUIRE(item.value().grad().defined());
      CHECK(item.value().grad().abs().sum().item<double>() > 0);
    }
    CHECK(saw_conv);

    memscript::test::TempDir folder;
    save_decoder(*model, folder.path() / "model.pt");
    Decoder loaded = load_decoder(folder.path() / "model.pt");
    CHECK(loaded->config() == model->config());
    CHECK(loaded->config()["layers"][0]["short_conv"] == 4);
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
