// Every mixer on CUDA against the same mixer on the CPU, from the same weights and batch: the
// logits, the loss, every parameter's gradient, the parameters after one AdamW step, and the
// state handed from one chunk to the next. impl = "fused" on CUDA runs the kernels of
// kernels/*.cu (float32); impl = "reference" runs composed libtorch ops on CUDA; float64 on CUDA
// takes the fused ops' libtorch fallback. Run by `make test-gpu` (label gpu).

#include <catch2/catch.hpp>

#include "../model/model_harness.h"
#include "../support/process.h"
#include "runtime/checkpoint.h"
#include "runtime/model/mixer.h"
#include "runtime/model/serialize.h"
#include "runtime/ops/cross_entropy/cross_entropy.h"
#include "runtime/optim.h"

using namespace memscript;
using memscript::test::chunked_logits;
using memscript::test::ExtraOptions;
using memscript::test::make_decoder;
using memscript::test::require_close;

namespace {

struct Variant {
  std::string mixer;
  ExtraOptions options;
  std::string label() const {
    std::string text = mixer;
    for (const auto& [key, value] : options) text += " " + key + "=" + value.show();
    return text;
  }
};

// Each mixer at its defaults, and the options that choose other kernel paths.
std::vector<Variant> variants(const std::string& impl) {
  std::vector<Variant> out;
  for (const MixerEntry& entry : mixer_entries()) {
    out.push_back({entry.name, {}});
    if (entry.negative_eigenvalues) out.push_back({entry.name, {{"negative_eigenvalues", {true}}}});
    if (entry.short_conv) out.push_back({entry.name, {{"short_conv", {int64_t{4}}}}});
  }
  // ALiBi's bias goes to libtorch's attention as a float mask, another of its paths; relative
  // positions run composed ops.
  out.push_back({"gpt", {{"positions", {std::string("alibi")}}}});
  out.push_back({"gpt", {{"positions", {std::string("relative")}}}});
  // flash-linear-attention's DeltaNet layout: convolutions on q, k and v, the output norm, in
  // that library's RMSNorm + SwiGLU blocks.
  out.push_back({"deltanet",
                 {{"qkv_conv", {int64_t{4}}},
                  {"o_norm", {true}},
                  {"norm", {std::string("rms")}},
                  {"mlp", {std::string("swiglu")}}}});
  for (Variant& v : out) v.options["impl"] = {impl};
  return out;
}

struct Step {
  torch::Tensor logits, loss;
  std::map<std::string, torch::Tensor> grads, after;  // gradients; parameters after AdamW
};

// One training step: forward, masked cross-entropy, backward, memscript's AdamW (its CPU loop
// on the CPU, libtorch ops on CUDA).
Step train_step(Decoder& model, const torch::Tensor& tokens, const torch::Tensor& targets,
                const torch::Tensor& mask) {
  const torch::Device device = model->device();
  const std::unique_ptr<Optimizer> optimizer = OptimizerSpec{}.make(model->parameters());
  optimizer->zero_grad();
  Step step;
  step.logits = model->forward(tokens.to(device));
  step.loss = masked_cross_entropy(step.logits, targets.to(device), mask.to(device));
  step.loss.backward();
  for (const auto& item : model->named_parameters())
    if (item.value().grad().defined()) step.grads[item.key()] = item.value().grad().cpu();
  optimizer->step();
  for (const auto& item : model->named_parameters())
    step.after[item.key()] = item.value().detach().cpu();
  step.logits = step.logits.detach().cpu();
  step.loss = step.loss.detach().cpu();
  return step;
}

// model_harness's require_close (sizes, relative error), after a check that says apart a NaN or
// an infinity from a merely large error.
void check_close(const torch::Tensor& gpu, const torch::Tensor& cpu, double tolerance,
                 const std::string& what) {
  INFO(what);
  REQUIRE(torch::isfinite(gpu).all().item<bool>());
  require_close(gpu, cpu, tolerance, what);
}

void compare_devices(const std::string& impl, torch::Dtype dtype, double tolerance) {
  const int64_t batch = 3, length = 70;
  torch::manual_seed(11);
  const torch::Tensor tokens = torch::randint(0, 4, {batch, length}, torch::kInt64);
  const torch::Tensor targets = torch::randint(0, 3, {batch, length}, torch::kInt64);
  const torch::Tensor mask = torch::rand({batch, length}) < 0.7;
  // d_model 16 with 2 heads: heads of 8, less than a warp; 96 with 2: heads of 48, a warp and
  // a half, and an LSTM of 384 gates; 128 with 2: heads of 64, the matrix-state kernels' largest
  // compiled head size (the delta rule's forward keeps a row of 64 in registers) and shared
  // memory past the 48 KiB every block gets.
  for (const int64_t d_model : {16, 96, 128})
    for (const Variant& v : variants(impl)) {
      SECTION(v.label() + " d_model=" + std::to_string(d_model)) {
        Decoder cpu = make_decoder(v.mixer, d_model, 2, 2, v.options);
        Decoder gpu = make_decoder(v.mixer, d_model, 2, 2, v.options);
        {
          torch::NoGradGuard no_grad;
          auto target = gpu->named_parameters();
          for (const auto& item : cpu->named_parameters()) target[item.key()].copy_(item.value());
        }
        cpu->to(dtype);
        gpu->to(torch::Device(torch::kCUDA), dtype);
        const Step on_cpu = train_step(cpu, tokens, targets, mask);
        const Step on_gpu = train_step(gpu, tokens, targets, mask);
        check_close(on_gpu.logits, on_cpu.logits, tolerance, "logits");
        check_close(on_gpu.loss, on_cpu.loss, tolerance, "loss");
        REQUIRE(on_gpu.grads.size() == on_cpu.grads.size());
        for (const auto& [name, grad] : on_cpu.grads)
          check_close(on_gpu.grads.at(name), grad, 10 * tolerance, "gradient of " + name);
        // Adam moves each parameter by at most about lr, ±lr where a gradient is all but zero
        // whatever its rounding: after the step the two agree to within 2 lr, absolutely.
        for (const auto& [name, value] : on_cpu.after) {
          INFO("after AdamW: " << name);
          CHECK((on_gpu.after.at(name) - value).abs().max().item<double>() <=
                2 * OptimizerSpec{}.lr);
        }

        // Two chunks on the GPU, the second from the first's state, give the one-pass logits.
        torch::NoGradGuard no_grad;
        const torch::Tensor whole = gpu->forward(tokens.cuda()).cpu();
        const torch::Tensor chunked = chunked_logits(gpu, tokens.cuda(), {29, length}).cpu();
        check_close(chunked, whole, tolerance, "chunks 29 + 41 against one pass");
      }
    }
}

}  // namespace

TEST_CASE("every mixer, fused kernels: a training step on CUDA matches the CPU in float32",
          "[gpu]") {
  compare_devices("fused", torch::kFloat32, 2e-4);
}

TEST_CASE("every mixer, reference ops: a training step on CUDA matches the CPU in float32",
          "[gpu]") {
  compare_devices("reference", torch::kFloat32, 2e-4);
}

TEST_CASE("every mixer in float64 on CUDA (the fused ops' fallback) matches the CPU", "[gpu]") {
  compare_devices("fused", torch::kFloat64, 1e-9);
}

TEST_CASE("a checkpoint written on CUDA resumes on the CPU, and one written on the CPU on CUDA",
          "[gpu]") {
  memscript::test::TempDir root;
  for (const bool written_on_gpu : {true, false}) {
    INFO((written_on_gpu ? "CUDA -> CPU" : "CPU -> CUDA"));
    Decoder source = make_decoder("deltanet", 16, 2, 2, {});
    const torch::Device from = written_on_gpu ? torch::kCUDA : torch::kCPU;
    const torch::Device to = written_on_gpu ? torch::kCPU : torch::kCUDA;
    source->to(from);
    std::unique_ptr<Optimizer> optimizer = OptimizerSpec{}.make(source->parameters());
    const RunFolder folder =
        RunFolder::create(root.path(), written_on_gpu ? "from-cuda" : "from-cpu");
    write_checkpoint(folder, *source, *optimizer, {{"step", 3}});
    Decoder target = make_decoder("deltanet", 16, 2, 2, {});
    target->to(to);
    std::unique_ptr<Optimizer> target_optimizer = OptimizerSpec{}.make(target->parameters());
    const auto loop = read_checkpoint(folder, *target, *target_optimizer);
    REQUIRE(loop);
    CHECK((*loop)["step"] == 3);
    auto source_parameters = source->named_parameters();
    for (const auto& item : target->named_parameters()) {
      INFO(item.key());
      CHECK(item.value().device().type() == to.type());
      CHECK(torch::equal(item.value().cpu(), source_parameters[item.key()].cpu()));
    }
  }
}

TEST_CASE("a model saved on CUDA loads on the CPU with the same parameters", "[gpu]") {
  memscript::test::TempDir root;
  Decoder source = make_decoder("deltanet", 16, 2, 2, {});
  source->to(torch::kCUDA);
  const std::filesystem::path path = root.path() / "model.pt";
  save_decoder(*source, path);
  Decoder loaded = load_decoder(path);
  auto source_parameters = source->named_parameters();
  for (const auto& item : loaded->named_parameters()) {
    INFO(item.key());
    CHECK(item.value().device().is_cpu());
    CHECK(torch::equal(item.value(), source_parameters[item.key()].cpu()));
  }
}
