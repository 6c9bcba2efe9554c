// The mamba mixer's own checks: what the generic mixer tests cannot see because they
// run each mixer with its defaults (position kinds, max_length, negative eigenvalues), and the
// core computations against written-out formulas.

#include <catch2/catch.hpp>
#include <cmath>

#include "model_harness.h"
#include "runtime/model/mixers/mamba.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::ExtraOptions;
using memscript::test::make_decoder;
using memscript::test::random_tokens;
using torch::indexing::Slice;

namespace {

const auto kDouble = torch::TensorOptions().dtype(torch::kDouble);

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
  const torch::Tensor whole = model->forward(tokens);
  DecoderOutput first = model->forward(tokens.index({Slice(), Slice(0, 13)}), DecoderState{});
  DecoderOutput second = model->forward(tokens.index({Slice(), Slice(13, 22)}), first.state);
  DecoderOutput third = model->forward(tokens.index({Slice(), Slice(22, 29)}), second.state);
  const torch::Tensor chunked = torch::cat({first.logits, second.logits, third.logits}, 1);
  CHECK(torch::allclose(whole, chunked, 1e-9, 1e-9));
}

Decoder double_decoder(const std::string& mixer, const ExtraOptions& extra) {
  Decoder model = make_decoder(mixer, 16, 2, 2, extra);
  model->to(torch::kDouble);
  return model;
}

}  // namespace

TEST_CASE("mamba's transition lies in (0, 1), or reaches into (-1, 0) with negative eigenvalues") {
  // ΔA over the range the block produces: Δ > 0 and A < 0, from tiny steps to long ones.
  const torch::Tensor delta_A = -torch::logspace(-6, 1.5, 200, 10, kDouble);
  const torch::Tensor positive = mamba_transition(delta_A, false);
  CHECK(positive.gt(0).all().item<bool>());
  CHECK(positive.lt(1).all().item<bool>());
  const torch::Tensor signed_ = mamba_transition(delta_A, true);
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
  const ScanOutput scan = selective_scan(x, delta, A, B, C, h0, negative);
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
        CHECK(scan.h[n][c][s].item<double>() == Approx(h[size_t(s)]).epsilon(1e-12));
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
