// memscript's models against the same decoder written in PyTorch (bench/pytorch_reference.py),
// so that nobody has to take memscript's training on faith: the weights go out as safetensors
// under memscript's parameter names, bench/pytorch_crosscheck.py loads them, runs the same
// tokens and trains on the same batches with torch.optim.Adam. Needs the bootstrap's Python
// with torch (MEMSCRIPT_TORCH_PYTHON); without it the test says so and checks only the file.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <regex>

#include "../support/process.h"
#include "model_harness.h"
#include "runtime/model/mixer.h"
#include "runtime/model/safetensors.h"
#include "runtime/optim.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::make_decoder;
using memscript::test::random_tokens;

namespace {

NamedTensors parameters_of(Decoder& model) {
  NamedTensors named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  return named;
}

// Trains `steps` steps of Adam (lr 1e-3, no weight decay) on fixed batches and returns the
// batch file's tensors: the first batch's tokens and logits, the batches and each step's loss.
NamedTensors train_and_record(Decoder& model, int64_t steps, torch::ScalarType dtype) {
  torch::manual_seed(7);
  const torch::Tensor tokens = torch::randint(0, 4, {steps, 4, 12}, torch::kInt64);
  const torch::Tensor targets = torch::randint(0, 3, {steps, 4, 12}, torch::kInt64);
  const torch::Tensor mask = torch::rand({steps, 4, 12}) < 0.7;
  const torch::Tensor logits = model->forward(tokens[0]).detach();
  OptimizerSpec spec;
  spec.kind = "adam";
  spec.weight_decay = 0;
  const std::unique_ptr<Optimizer> optimizer = spec.make(model->parameters());
  torch::Tensor losses = torch::empty({steps}, torch::TensorOptions(dtype));
  for (int64_t step = 0; step < steps; ++step) {
    optimizer->zero_grad();
    const torch::Tensor loss =
        masked_cross_entropy(model->forward(tokens[step]), targets[step], mask[step]);
    loss.backward();
    optimizer->step();
    losses[step] = loss.detach();
  }
  return {{"tokens", tokens[0]},      {"logits", logits},   {"train_tokens", tokens},
          {"train_targets", targets}, {"train_mask", mask}, {"train_losses", losses}};
}

}  // namespace

TEST_CASE("safetensors files round-trip names, dtypes, shapes, bytes and metadata") {
  memscript::test::TempDir folder;
  const NamedTensors written = {{"b", torch::arange(6, torch::kFloat64).reshape({2, 3})},
                                {"a", torch::tensor({true, false})},
                                {"empty", torch::zeros({0, 4})},
                                {"i", torch::tensor({int64_t{-3}, int64_t{1} << 40})}};
  save_safetensors(folder.path() / "x.safetensors", written, {{"k", "v"}});
  const SafetensorsFile read = load_safetensors(folder.path() / "x.safetensors");
  REQUIRE(read.tensors.size() == written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    INFO(written[i].first);
    CHECK(read.tensors[i].first == written[i].first);
    CHECK(read.tensors[i].second.scalar_type() == written[i].second.scalar_type());
    CHECK(torch::equal(read.tensors[i].second, written[i].second));
  }
  CHECK(read.metadata.at("k") == "v");
  CHECK_THROWS_WITH(save_safetensors(folder.path() / "y", {{"h", torch::zeros({2}, torch::kHalf)}}),
                    Contains("only float32, float64, int64 and bool"));
  CHECK_THROWS_WITH(
      save_safetensors(folder.path() / "y", {{"a", torch::zeros({1})}, {"a", torch::zeros({1})}}),
      Contains("given twice"));
  // A header that claims more bytes than the file has is refused before anything is allocated.
  std::string text = memscript::test::read_file(folder.path() / "x.safetensors");
  const size_t at = text.find("[2,3]");
  REQUIRE(at != std::string::npos);
  text.replace(at, 5, "[9,9]");
  std::FILE* out = std::fopen((folder.path() / "bad.safetensors").c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), out);
  std::fclose(out);
  CHECK_THROWS_WITH(load_safetensors(folder.path() / "bad.safetensors"),
                    Contains("has a byte range that does not fit"));
}

namespace {

// Writes the model and `steps` recorded Adam steps, runs pytorch_crosscheck.py on them and checks
// that it agrees; false when no Python with torch is there (the caller stops then).
bool cross_check(Decoder& model, int64_t steps, torch::ScalarType dtype) {
  const std::string python = MEMSCRIPT_TORCH_PYTHON;
  const std::string script = std::string(MEMSCRIPT_BENCH_DIR) + "/pytorch_crosscheck.py";
  if (python.empty()) {
    WARN("no Python with torch configured (MEMSCRIPT_TORCH_PYTHON): cross-check not run");
    return false;
  }
  memscript::test::TempDir folder;
  model->to(dtype);
  save_safetensors(folder.path() / "model.safetensors", parameters_of(model),
                   {{"memscript.config", model->config().dump()}});
  save_safetensors(folder.path() / "batch.safetensors", train_and_record(model, steps, dtype));
  const memscript::test::ProcessResult result =
      memscript::test::run_process(python,
                                   {script, (folder.path() / "model.safetensors").string(),
                                    (folder.path() / "batch.safetensors").string()},
                                   MEMSCRIPT_BENCH_DIR);
  INFO(result.out << result.err);
  if (result.exit_code == 77) {
    WARN("torch cannot be imported by " << python << ": cross-check not run");
    return false;
  }
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains(std::to_string(steps) + " Adam steps, max relative loss error"));
  return true;
}

}  // namespace

TEST_CASE("PyTorch gives memscript's outputs and Adam losses from memscript's weights") {
  const char* dtype_name = GENERATE("float64", "float32");
  const torch::ScalarType dtype =
      std::string(dtype_name) == "float64" ? torch::kFloat64 : torch::kFloat32;
  const int64_t steps = dtype == torch::kFloat64 ? 200 : 50;
  for (const std::string& mixer : mixer_names()) {  // pytorch_reference.py has a twin of each
    INFO(mixer << " " << dtype_name);
    Decoder model = make_decoder(mixer, 8, 2, 2);
    if (!cross_check(model, steps, dtype)) return;
  }
}

TEST_CASE("PyTorch gives memscript's Adam losses for DeltaNet with o_norm, as Grazzi et al.'s") {
  for (const char* mixer : {"deltanet", "gated_deltanet"}) {
    INFO(mixer);
    Decoder model =
        make_decoder(mixer, 8, 2, 2, {{"o_norm", {true}}, {"negative_eigenvalues", {true}}});
    if (!cross_check(model, 50, torch::kFloat64)) return;
  }
}

// The layer as flash-linear-attention lays it out, in that library's blocks (RMSNorm, SwiGLU),
// and in memscript's (LayerNorm, GELU). In the RMSNorm + SwiGLU blocks, Adam amplifies the
// float64 rounding in which the two sides differ: their losses agree to 1e-15 over 10 steps,
// 2e-14 over 25, 1e-9 over 50 (a perturbation of the weights by 1e-15 alone moves PyTorch's
// own losses by 5e-12 over 50), so those models train 25 steps. A wrong gradient shows from
// the second step on.
TEST_CASE(
    "PyTorch gives memscript's Adam losses for DeltaNet laid out as flash-linear-attention's") {
  for (const char* mixer : {"deltanet", "gated_deltanet"}) {
    for (const bool fla_blocks : {false, true}) {
      INFO(mixer << (fla_blocks ? " in RMSNorm + SwiGLU blocks" : ""));
      memscript::test::ExtraOptions options = memscript::test::fla_deltanet_options(3);
      if (fla_blocks) {
        options["norm"] = {std::string("rms")};
        options["norm_eps"] = {1e-6};
        options["mlp"] = {std::string("swiglu")};
      }
      Decoder model = make_decoder(mixer, 8, 2, 2, options);
      if (!cross_check(model, fla_blocks ? 25 : 50, torch::kFloat64)) return;
    }
  }
}

// mlp_bias turns the default around: GELU without biases (off the fused LayerNorm + MLP node),
// SwiGLU with them.
TEST_CASE("PyTorch gives memscript's Adam losses with the MLP's biases taken away or added") {
  for (const char* mlp : {"gelu", "swiglu"}) {
    INFO(mlp);
    const bool swiglu = std::string(mlp) == "swiglu";
    Decoder model =
        make_decoder("gpt", 8, 2, 2, {{"mlp", {std::string(mlp)}}, {"mlp_bias", {swiglu}}});
    REQUIRE(model->config()["mlp_bias"] == swiglu);
    if (!cross_check(model, 50, torch::kFloat64)) return;
  }
}

TEST_CASE("PyTorch gives memscript's Adam losses for the study's models (preset seed-mini)") {
  for (const char* mixer :
       {"lstm", "qlstm", "lru", "linear_attention", "gpt", "deltanet", "mamba"}) {
    INFO(mixer);
    Decoder model = memscript::test::make_preset_decoder(mixer, "seed-mini", 4, 3);
    if (!cross_check(model, 50, torch::kFloat64)) return;
  }
}
