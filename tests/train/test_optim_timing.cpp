// Timings of the optimizer step, for the record (hidden: run with
// `memscript_train_tests "[.timing]"`, one thread). Not a pass/fail test.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "runtime/model/decoder.h"
#include "runtime/optim.h"

using namespace memscript;

namespace {

double median_microseconds(const std::function<void()>& step, int repeats) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}

std::vector<torch::Tensor> seed_mini_parameters(const std::string& mixer) {
  Options options("timing decoder");
  options.set("preset", {std::string("seed-mini")});
  options.set("mixer", {mixer});
  options.set("vocab", {int64_t{2}});
  options.set("classes", {int64_t{2}});
  auto model = std::make_shared<DecoderImpl>(options, nullptr, 1);
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& p : model->parameters()) {
    parameters.push_back(p.detach().clone().requires_grad_());
    parameters.back().mutable_grad() = torch::randn_like(p);
  }
  return parameters;
}

}  // namespace

TEST_CASE("optimizer step timings on a seed-mini model", "[.timing]") {
  torch::set_num_threads(1);
  for (const std::string mixer : {"deltanet", "lstm"}) {
    std::vector<torch::Tensor> ours = seed_mini_parameters(mixer);
    std::vector<torch::Tensor> theirs = seed_mini_parameters(mixer);
    int64_t numbers = 0;
    for (const torch::Tensor& p : ours) numbers += p.numel();
    OptimizerSpec spec;
    Optimizer optimizer(spec, ours);
    const double fused = median_microseconds(
        [&] { optimizer.step(1e-3, clip_scale(optimizer.gradient_norm(), 1.0)); }, 2000);
    torch::optim::AdamW reference(theirs, torch::optim::AdamWOptions(1e-3));
    const double libtorch = median_microseconds(
        [&] {
          torch::nn::utils::clip_grad_norm_(theirs, 1.0);
          reference.step();
        },
        2000);
    std::printf(
        "%s seed-mini: %zu tensors, %lld numbers: memscript step %.1f us, "
        "torch::optim::AdamW + clip_grad_norm_ %.1f us\n",
        mixer.c_str(), ours.size(), static_cast<long long>(numbers), fused, libtorch);
  }
}
