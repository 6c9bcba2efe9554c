#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>

#include "runtime/optim.h"

using namespace memscript;

namespace {

std::vector<torch::Tensor> make_parameters(torch::Dtype dtype) {
  torch::manual_seed(3);
  return {torch::randn({3, 4}, dtype).requires_grad_(), torch::randn({5}, dtype).requires_grad_()};
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : parameters) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// The same pseudo-random gradient for step s on both sets of parameters.
void set_gradients(std::vector<torch::Tensor>& parameters, int step) {
  torch::manual_seed(100 + step);
  for (torch::Tensor& p : parameters) p.mutable_grad() = torch::randn_like(p);
}

OptimizerSpec spec_of(const std::string& kind, double weight_decay, double momentum = 0) {
  OptimizerSpec spec;
  spec.kind = kind;
  spec.lr = 0.01;
  spec.beta1 = 0.9;
  spec.beta2 = 0.95;
  spec.eps = 1e-8;
  spec.weight_decay = weight_decay;
  spec.momentum = momentum;
  return spec;
}

std::unique_ptr<torch::optim::Optimizer> torch_optimizer(const OptimizerSpec& spec,
                                                         const std::vector<torch::Tensor>& p) {
  if (spec.kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        p,
        torch::optim::SGDOptions(spec.lr).momentum(spec.momentum).weight_decay(spec.weight_decay));
  }
  if (spec.kind == "adam") {
    return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(spec.lr)
                                                       .betas({spec.beta1, spec.beta2})
                                                       .eps(spec.eps)
                                                       .weight_decay(spec.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(spec.lr)
                                                      .betas({spec.beta1, spec.beta2})
                                                      .eps(spec.eps)
                                                      .weight_decay(spec.weight_decay));
}

}  // namespace

TEST_CASE("adam, adamw and sgd follow libtorch's formulas step by step") {
  const std::vector<OptimizerSpec> specs = {spec_of("adam", 0.0), spec_of("adam", 0.1),
                                            spec_of("adamw", 0.1), spec_of("sgd", 0.0),
                                            spec_of("sgd", 0.05, 0.9)};
  for (const OptimizerSpec& spec : specs) {
    for (const torch::Dtype dtype : {torch::kFloat64, torch::kFloat32}) {
      INFO(spec.config().dump() << " " << dtype);
      std::vector<torch::Tensor> ours = make_parameters(dtype);
      std::vector<torch::Tensor> theirs = clones(ours);
      Optimizer optimizer(spec, ours);
      auto reference = torch_optimizer(spec, theirs);
      for (int step = 1; step <= 6; ++step) {
        set_gradients(ours, step);
        set_gradients(theirs, step);
        optimizer.step(spec.lr);
        reference->step();
      }
      const double tolerance = dtype == torch::kFloat64 ? 1e-12 : 2e-6;
      for (size_t i = 0; i < ours.size(); ++i) {
        CHECK(torch::allclose(ours[i], theirs[i], tolerance, tolerance));
      }
      CHECK(optimizer.steps_taken() == 6);
    }
  }
}

TEST_CASE("the global gradient norm and the clipping factor") {
  std::vector<torch::Tensor> parameters = make_parameters(torch::kFloat32);
  parameters[0].mutable_grad() = torch::zeros_like(parameters[0]);
  parameters[0].mutable_grad().index_put_({0, 0}, 3.0);
  parameters[1].mutable_grad() = torch::zeros_like(parameters[1]);
  parameters[1].mutable_grad().index_put_({4}, 4.0);
  Optimizer optimizer(spec_of("sgd", 0.0), parameters);
  CHECK(optimizer.gradient_norm() == Approx(5.0));
  CHECK(clip_scale(5.0, 1.0) == Approx(1.0 / (5.0 + 1e-6)));
  CHECK(clip_scale(5.0, 10.0) == 1.0);
  CHECK(clip_scale(5.0, 0.0) == 1.0);
  // SGD with lr 1 and the gradient clipped to norm 1 moves the parameters by exactly that.
  const torch::Tensor before = parameters[1].detach().clone();
  optimizer.step(1.0, clip_scale(5.0, 1.0));
  CHECK((before - parameters[1]).index({4}).item<double>() == Approx(4.0 / 5.0).epsilon(1e-5));
}

TEST_CASE("parameters without a gradient are left alone") {
  std::vector<torch::Tensor> parameters = make_parameters(torch::kFloat32);
  const torch::Tensor before = parameters[1].detach().clone();
  parameters[0].mutable_grad() = torch::ones_like(parameters[0]);
  Optimizer optimizer(spec_of("adamw", 0.1), parameters);
  optimizer.step(0.01);
  CHECK(torch::equal(before, parameters[1]));
}

TEST_CASE("schedules: warmup, then constant, cosine or linear decay, by hand") {
  OptimizerSpec spec;
  spec.lr = 1.0;
  spec.schedule.warmup = 10;
  CHECK(spec.lr_at(1, 110) == Approx(0.1));
  CHECK(spec.lr_at(5, 110) == Approx(0.5));
  CHECK(spec.lr_at(10, 110) == Approx(1.0));
  CHECK(spec.lr_at(80, 110) == Approx(1.0));
  spec.schedule.decay = "cosine";
  spec.schedule.min_lr = 0.1;
  CHECK(spec.lr_at(10, 110) == Approx(1.0));
  CHECK(spec.lr_at(60, 110) == Approx(0.1 + 0.9 * 0.5));  // half way: cos = 0
  CHECK(spec.lr_at(35, 110) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4))));
  CHECK(spec.lr_at(110, 110) == Approx(0.1));
  spec.schedule.decay = "linear";
  CHECK(spec.lr_at(60, 110) == Approx(0.55));
  CHECK(spec.lr_at(110, 110) == Approx(0.1));
  spec.schedule.warmup = 0;
  spec.schedule.min_lr = 0;
  CHECK(spec.lr_at(1, 100) == Approx(0.99));
}

TEST_CASE("optimizer options are checked and recorded") {
  Options options("ms.optim.sgd");
  options.set("lr", {0.5});
  options.set("momentum", {0.9});
  options.set("warmup", {int64_t{5}});
  options.set("decay", {std::string("cosine")});
  const auto spec = make_optimizer_spec("sgd", options);
  options.finish();
  CHECK(spec->config()["momentum"] == 0.9);
  CHECK(spec->config()["schedule"]["decay"] == "cosine");
  Options bad("ms.optim.adam");
  bad.set("decay", {std::string("exponential")});
  CHECK_THROWS_WITH(make_optimizer_spec("adam", bad), Catch::Matchers::Contains("decay"));
  Options momentum_for_adam("ms.optim.adam");
  momentum_for_adam.set("momentum", {0.9});
  make_optimizer_spec("adam", momentum_for_adam);
  CHECK_THROWS_WITH(momentum_for_adam.finish(), Catch::Matchers::Contains("momentum"));
}

TEST_CASE("an optimizer saved and loaded continues bit for bit") {
  for (const std::string kind : {"adamw", "sgd"}) {
    INFO(kind);
    const OptimizerSpec spec = spec_of(kind, 0.1, kind == "sgd" ? 0.9 : 0.0);
    std::vector<torch::Tensor> parameters = make_parameters(torch::kFloat32);
    Optimizer optimizer(spec, parameters);
    for (int step = 1; step <= 3; ++step) {
      set_gradients(parameters, step);
      optimizer.step(spec.lr);
    }
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    std::ostringstream bytes;
    archive.save_to(bytes);
    std::vector<torch::Tensor> resumed = clones(parameters);
    Optimizer restored(spec, resumed);
    torch::serialize::InputArchive input;
    std::istringstream in(bytes.str());
    input.load_from(in);
    restored.load(input);
    CHECK(restored.steps_taken() == 3);
    for (int step = 4; step <= 6; ++step) {
      set_gradients(parameters, step);
      set_gradients(resumed, step);
      optimizer.step(spec.lr);
      restored.step(spec.lr);
    }
    for (size_t i = 0; i < parameters.size(); ++i) CHECK(torch::equal(parameters[i], resumed[i]));
  }
}
