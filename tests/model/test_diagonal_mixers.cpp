// The diagonal recurrences' own checks: qlstm, lru and mingru. Option errors name the option; the
// eigenvalue ranges are the ones the headers promise, with and without negative eigenvalues; and
// a small recurrence written out by hand, scalar by scalar, matches each mixer's forward.

#include <catch2/catch.hpp>
#include <cmath>
#include <complex>
#include <numbers>

#include "model_harness.h"
#include "runtime/model/mixers/lru.h"
#include "runtime/model/mixers/mingru.h"
#include "runtime/model/mixers/qlstm.h"
#include "runtime/ops/gated_scan/gated_scan.h"

using namespace memscript;
using Catch::Matchers::Contains;

namespace {

const MixerContext kTiny{2, 1, 1};  // d_model 2: small enough to write the recurrence out

template <typename Impl>
std::shared_ptr<Impl> build(const std::map<std::string, OptionValue>& values,
                            const MixerContext& context = kTiny) {
  Options options("test mixer");
  for (const auto& [key, value] : values) options.set(key, value);
  auto mixer = std::make_shared<Impl>(context, options);
  options.finish();
  mixer->to(torch::kDouble);
  return mixer;
}

template <typename Impl>
std::string build_error(const std::map<std::string, OptionValue>& values) {
  try {
    build<Impl>(values);
  } catch (const UserError& error) {
    return error.what();
  }
  return "no error";
}

torch::Tensor parameter(const torch::nn::Module& module, const std::string& name) {
  return module.named_parameters()[name].detach();
}

// A fixed input [1, 3, 2] in float64.
torch::Tensor three_steps() {
  return torch::tensor({0.5, -1.0, 1.5, 0.25, -0.75, 2.0}, torch::kDouble).reshape({1, 3, 2});
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// Row `row` of a [rows, 2] weight times the 2-vector (v0, v1).
double dot_row(const torch::Tensor& weight, int64_t row, double v0, double v1) {
  return weight[row][0].item<double>() * v0 + weight[row][1].item<double>() * v1;
}

}  // namespace

TEST_CASE("qlstm and mingru reject a zero hidden size, naming the option") {
  CHECK_THAT(build_error<QlstmMixerImpl>({{"hidden", {int64_t{0}}}}),
             Contains("'hidden' must be >= 1, got 0"));
  CHECK_THAT(build_error<MinGruMixerImpl>({{"hidden", {int64_t{0}}}}),
             Contains("'hidden' must be >= 1, got 0"));
  CHECK_THAT(build_error<QlstmMixerImpl>({{"negative_eigenvalues", {std::string("yes")}}}),
             Contains("'negative_eigenvalues'"));
}

TEST_CASE("lru rejects a bad ring, phase or state size, naming the option") {
  CHECK_THAT(build_error<LruMixerImpl>({{"r_min", {0.9}}, {"r_max", {0.5}}}),
             Contains("'r_min' must be < r_max"));
  CHECK_THAT(build_error<LruMixerImpl>({{"r_min", {0.5}}, {"r_max", {0.5}}}),
             Contains("'r_min' must be < r_max"));
  CHECK_THAT(build_error<LruMixerImpl>({{"r_min", {-0.1}}}), Contains("'r_min' must be >= 0"));
  CHECK_THAT(build_error<LruMixerImpl>({{"r_max", {1.5}}}), Contains("'r_max' must be <= 1"));
  CHECK_THAT(build_error<LruMixerImpl>({{"max_phase", {-1.0}}}),
             Contains("'max_phase' must be >= 0"));
  CHECK_THAT(build_error<LruMixerImpl>({{"d_state", {int64_t{0}}}}),
             Contains("'d_state' must be >= 1, got 0"));
}

TEST_CASE("config lists every resolved option") {
  const auto qlstm = build<QlstmMixerImpl>({{"negative_eigenvalues", {true}}});
  CHECK(qlstm->config() ==
        nlohmann::json{
            {"mixer", "qlstm"}, {"hidden", 2}, {"negative_eigenvalues", true}, {"impl", "fused"}});
  CHECK(
      build<MinGruMixerImpl>({{"hidden", {int64_t{5}}}})->config() ==
      nlohmann::json{
          {"mixer", "mingru"}, {"hidden", 5}, {"negative_eigenvalues", false}, {"impl", "fused"}});
  const nlohmann::json lru = build<LruMixerImpl>({{"r_min", {0.5}}})->config();
  CHECK(lru["mixer"] == "lru");
  CHECK(lru["d_state"] == 2);
  CHECK(lru["r_min"] == 0.5);
  CHECK(lru["r_max"] == 1.0);
  CHECK(lru["max_phase"] == Approx(2 * std::numbers::pi));
  CHECK(lru["negative_eigenvalues"] == false);
  CHECK(lru["impl"] == "fused");
}

TEST_CASE("the qlstm forget gate is in (0, 1) by default and reaches (-1, 0) on request") {
  const torch::Tensor preactivation = torch::linspace(-30, 30, 601, torch::kDouble);
  const torch::Tensor plain = ops::qlstm_forget_gate(preactivation, false);
  CHECK(plain.min().item<double>() > 0);
  CHECK(plain.max().item<double>() < 1);
  const torch::Tensor stretched = ops::qlstm_forget_gate(preactivation, true);
  CHECK(stretched.min().item<double>() > -1);
  CHECK(stretched.min().item<double>() < -0.99);
  CHECK(stretched.max().item<double>() < 1);
  // At the init pre-activation (b_f + 1 = 1) the plain gate remembers more than it forgets.
  CHECK(ops::qlstm_forget_gate(torch::ones({1}, torch::kDouble), false).item<double>() ==
        Approx(0.7310585786));
}

TEST_CASE("qlstm matches its recurrence written out for 3 steps") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  const auto mixer = build<QlstmMixerImpl>({{"negative_eigenvalues", {negative}}});
  {
    // A forget bias of −3 puts the stretched gate near −0.76: the cell must flip sign.
    torch::NoGradGuard no_grad;
    mixer->named_parameters()["forget_bias"].fill_(-3.0);
    mixer->named_parameters()["gates.weight"].normal_(0.0, 0.5);
    mixer->named_parameters()["output.weight"].normal_(0.0, 0.5);
    mixer->named_parameters()["output.bias"].normal_(0.0, 0.5);
  }
  const torch::Tensor w = parameter(*mixer, "gates.weight");  // rows: f0 f1 i0 i1 z0 z1 o0 o1
  const torch::Tensor b_f = parameter(*mixer, "forget_bias");
  const torch::Tensor w_out = parameter(*mixer, "output.weight");
  const torch::Tensor b_out = parameter(*mixer, "output.bias");
  const torch::Tensor x = three_steps();

  const MixerOutput out = mixer->forward(x, MixerState{});
  double c[2] = {0, 0};
  bool flipped = false;
  for (int64_t t = 0; t < 3; ++t) {
    const double x0 = x[0][t][0].item<double>(), x1 = x[0][t][1].item<double>();
    double h[2];
    for (int64_t k = 0; k < 2; ++k) {
      const double pre_f = dot_row(w, k, x0, x1) + b_f[k].item<double>() + 1;
      const double f = negative ? 2 * sigmoid(pre_f) - 1 : sigmoid(pre_f);
      const double i = sigmoid(dot_row(w, 2 + k, x0, x1));
      const double z = std::tanh(dot_row(w, 4 + k, x0, x1));
      const double o = sigmoid(dot_row(w, 6 + k, x0, x1));
      if (f < 0) flipped = true;
      c[k] = f * c[k] + i * z;
      h[k] = o * std::tanh(c[k]);
    }
    for (int64_t j = 0; j < 2; ++j) {
      const double y = dot_row(w_out, j, h[0], h[1]) + b_out[j].item<double>();
      CHECK(out.y[0][t][j].item<double>() == Approx(y).margin(1e-12));
    }
  }
  CHECK(flipped == negative);
  CHECK(out.state.tensors.at(0)[0][0].item<double>() == Approx(c[0]).margin(1e-12));
  CHECK(out.state.tensors.at(0)[0][1].item<double>() == Approx(c[1]).margin(1e-12));
  CHECK(out.state.position == 3);
}

TEST_CASE("mingru matches its recurrence written out for 3 steps") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  const auto mixer = build<MinGruMixerImpl>({{"negative_eigenvalues", {negative}}});
  {
    torch::NoGradGuard no_grad;
    for (auto& item : mixer->named_parameters()) item.value().normal_(0.0, 0.5);
  }
  const torch::Tensor w = parameter(*mixer, "input.weight");  // rows: z0 z1 h0 h1
  const torch::Tensor b = parameter(*mixer, "input.bias");
  const torch::Tensor w_out = parameter(*mixer, "output.weight");
  const torch::Tensor b_out = parameter(*mixer, "output.bias");
  const torch::Tensor x = three_steps();

  const MixerOutput out = mixer->forward(x, MixerState{});
  double h[2] = {0, 0};
  for (int64_t t = 0; t < 3; ++t) {
    const double x0 = x[0][t][0].item<double>(), x1 = x[0][t][1].item<double>();
    for (int64_t k = 0; k < 2; ++k) {
      const double z = sigmoid(dot_row(w, k, x0, x1) + b[k].item<double>());
      const double candidate = dot_row(w, 2 + k, x0, x1) + b[2 + k].item<double>();
      h[k] = (negative ? 1 - 2 * z : 1 - z) * h[k] + z * candidate;
    }
    for (int64_t j = 0; j < 2; ++j) {
      const double y = dot_row(w_out, j, h[0], h[1]) + b_out[j].item<double>();
      CHECK(out.y[0][t][j].item<double>() == Approx(y).margin(1e-12));
    }
  }
  CHECK(out.state.tensors.at(0)[0][1].item<double>() == Approx(h[1]).margin(1e-12));
}

TEST_CASE("lru matches its complex recurrence written out for 3 steps") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  const auto mixer = build<LruMixerImpl>({{"negative_eigenvalues", {negative}}});
  {
    torch::NoGradGuard no_grad;
    for (const char* name : {"b_re.weight", "b_im.weight", "c_re.weight", "c_im.weight", "d",
                             "output.weight", "output.bias"}) {
      mixer->named_parameters()[name].normal_(0.0, 0.5);
    }
  }
  using Complex = std::complex<double>;
  const torch::Tensor nu = parameter(*mixer, "nu");
  const torch::Tensor theta = parameter(*mixer, "theta");
  const torch::Tensor b_re = parameter(*mixer, "b_re.weight");
  const torch::Tensor b_im = parameter(*mixer, "b_im.weight");
  const torch::Tensor c_re = parameter(*mixer, "c_re.weight");
  const torch::Tensor c_im = parameter(*mixer, "c_im.weight");
  const torch::Tensor d = parameter(*mixer, "d");
  const torch::Tensor w_out = parameter(*mixer, "output.weight");
  const torch::Tensor b_out = parameter(*mixer, "output.bias");
  const torch::Tensor x = three_steps();

  const MixerOutput out = mixer->forward(x, MixerState{});
  Complex state[2] = {0.0, 0.0};
  for (int64_t t = 0; t < 3; ++t) {
    const double u0 = x[0][t][0].item<double>(), u1 = x[0][t][1].item<double>();
    for (int64_t k = 0; k < 2; ++k) {
      const double decay = std::exp(-std::exp(nu[k].item<double>()));
      const double a = negative ? 2 * decay - 1 : decay;
      const Complex lambda = a * std::exp(Complex(0, std::exp(theta[k].item<double>())));
      const double gamma = std::sqrt(1 - std::norm(lambda));
      const Complex bu(dot_row(b_re, k, u0, u1), dot_row(b_im, k, u0, u1));
      state[k] = lambda * state[k] + gamma * bu;
    }
    double y[2];
    for (int64_t j = 0; j < 2; ++j) {
      const Complex c(c_re[j][0].item<double>(), c_im[j][0].item<double>());
      const Complex c1(c_re[j][1].item<double>(), c_im[j][1].item<double>());
      y[j] = (c * state[0] + c1 * state[1]).real() + d[j].item<double>() * (j == 0 ? u0 : u1);
    }
    for (int64_t j = 0; j < 2; ++j) {
      const double expected = dot_row(w_out, j, y[0], y[1]) + b_out[j].item<double>();
      CHECK(out.y[0][t][j].item<double>() == Approx(expected).margin(1e-12));
    }
  }
  CHECK(out.state.tensors.at(0)[0][0].item<double>() == Approx(state[0].real()).margin(1e-12));
  CHECK(out.state.tensors.at(1)[0][1].item<double>() == Approx(state[1].imag()).margin(1e-12));
}

TEST_CASE("lru starts on the ring: r_min <= |lambda| <= r_max, phase in [0, max_phase]") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  torch::manual_seed(3);
  const MixerContext wide{8, 1, 1};
  const auto mixer = build<LruMixerImpl>({{"d_state", {int64_t{512}}},
                                          {"r_min", {0.4}},
                                          {"r_max", {0.9}},
                                          {"max_phase", {std::numbers::pi / 2}},
                                          {"negative_eigenvalues", {negative}}},
                                         wide);
  const auto [re, im] = mixer->eigenvalues();
  const torch::Tensor modulus = torch::sqrt(re * re + im * im);
  // Parameters start in float32, so allow its rounding.
  CHECK(modulus.min().item<double>() >= 0.4 - 1e-5);
  CHECK(modulus.max().item<double>() <= 0.9 + 1e-5);
  CHECK(modulus.min().item<double>() < 0.45);  // the whole ring is used
  CHECK(modulus.max().item<double>() > 0.85);
  const torch::Tensor phase = torch::atan2(im, re);
  CHECK(phase.min().item<double>() >= 0);
  CHECK(phase.max().item<double>() <= std::numbers::pi / 2 + 1e-5);
}

TEST_CASE("lru keeps |lambda| < 1 for any nu, and the default ring reaches 1 without NaN") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  const auto mixer = build<LruMixerImpl>(
      {{"d_state", {int64_t{256}}}, {"negative_eigenvalues", {negative}}}, MixerContext{8, 1, 1});
  {
    const auto [re, im] = mixer->eigenvalues();
    CHECK((re * re + im * im).max().item<double>() < 1);
  }
  torch::NoGradGuard no_grad;
  mixer->named_parameters()["nu"].copy_(torch::linspace(-30, 3, 256, torch::kDouble));
  const auto [re, im] = mixer->eigenvalues();
  CHECK((re * re + im * im).max().item<double>() < 1);
  const torch::Tensor y = mixer->forward(torch::randn({2, 9, 8}, torch::kDouble));
  CHECK(torch::isfinite(y).all().item<bool>());
}

TEST_CASE("lru with max_phase 0 is real: lambda in (0, 1), or in (-1, 1) on request") {
  const bool negative = GENERATE(false, true);
  INFO("negative_eigenvalues " << negative);
  const auto mixer =
      build<LruMixerImpl>({{"max_phase", {0.0}}, {"negative_eigenvalues", {negative}}});
  CHECK_FALSE(mixer->named_parameters().contains("theta"));
  torch::NoGradGuard no_grad;
  mixer->named_parameters()["nu"].copy_(torch::tensor({-3.0, 2.5}, torch::kDouble));
  const auto [re, im] = mixer->eigenvalues();
  CHECK(im.abs().max().item<double>() == 0);
  CHECK(re.max().item<double>() < 1);
  CHECK(re.min().item<double>() > -1);
  if (negative) {
    CHECK(re.min().item<double>() < -0.99);
  } else {
    CHECK(re.min().item<double>() > 0);
  }
}

// The generic tests check the defaults; the stretched variants share the scan but not the gate.
TEST_CASE("the negative_eigenvalues variants continue exactly across chunks") {
  const std::string mixer = GENERATE(as<std::string>{}, "qlstm", "mingru", "lru");
  INFO(mixer);
  test::ExtraOptions extra = {{"negative_eigenvalues", {true}}};
  if (mixer == "lru") extra["max_phase"] = {0.0};
  Decoder model = test::make_decoder(mixer, 16, 2, 2, extra);
  model->to(torch::kDouble);
  const torch::Tensor tokens = test::random_tokens(3, 20, 5);
  CHECK(torch::allclose(model->forward(tokens), test::chunked_logits(model, tokens, {7, 20}), 1e-9,
                        1e-9));
}
