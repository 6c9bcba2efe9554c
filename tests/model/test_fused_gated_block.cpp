// The fused pre-norm + qLSTM / minGRU block (kernels/gated_block/gated_block.h through
// MixerImpl::forward_normed) against the reference mixer after a composed layer norm: outputs,
// final states and every gradient (input, initial state, the norm's and the mixer's
// parameters), in float64 to 1e-9 and float32 to 1e-4; the same bits at any thread count; and
// the widths past the kernel's limit taking the separate nodes.

#include <catch2/catch.hpp>

#include <string>

#include "model_harness.h"
#include "runtime/model/mixer.h"

using namespace memscript;
using memscript::test::require_close;

namespace {

struct Setup {
  std::string mixer;
  int64_t d_model = 4;
  int64_t hidden = 4;
  bool negative = false;
  torch::Dtype dtype = torch::kDouble;
};

Mixer build(const Setup& s, const std::string& impl) {
  Options options("test mixer");
  options.set("impl", {impl});
  options.set("hidden", {s.hidden});
  options.set("negative_eigenvalues", {s.negative});
  torch::manual_seed(5);
  Mixer mixer = make_mixer(s.mixer, MixerContext{s.d_model, 2, 2}, options);
  options.finish();
  mixer->to(s.dtype);
  // Biases away from their zero initialization, so that their gradients' paths matter.
  torch::NoGradGuard no_grad;
  for (auto& item : mixer->named_parameters())
    item.value().add_(torch::randn_like(item.value()) * 0.3);
  return mixer;
}

struct Run {
  torch::Tensor y, state_out, grad_x, grad_state_in, grad_norm_weight, grad_norm_bias;
  std::map<std::string, torch::Tensor> grad_parameters;
  std::string node;  // the name of y's autograd node
};

Run run(Mixer& mixer, const Setup& s, int64_t batch, int64_t length, bool with_state) {
  const auto options = torch::TensorOptions().dtype(s.dtype);
  torch::manual_seed(7);
  const torch::Tensor x = torch::randn({batch, length, s.d_model}, options).requires_grad_(true);
  const torch::Tensor weight = (1 + 0.3 * torch::randn({s.d_model}, options)).requires_grad_(true);
  const torch::Tensor bias = (0.3 * torch::randn({s.d_model}, options)).requires_grad_(true);
  MixerState state;
  if (with_state) state = {{torch::randn({batch, s.hidden}, options).requires_grad_(true)}, 3};
  mixer->zero_grad();
  const MixerOutput out = mixer->forward_normed(x, {weight, bias, 1e-5}, state);
  torch::Tensor loss = (out.y * torch::randn_like(out.y)).sum();
  loss = loss + (out.state.tensors.at(0) * torch::randn_like(out.state.tensors.at(0))).sum();
  loss.backward();
  Run r{out.y.detach(),
        out.state.tensors.at(0).detach(),
        x.grad(),
        with_state ? state.tensors.at(0).grad() : torch::Tensor(),
        weight.grad(),
        bias.grad(),
        {},
        out.y.grad_fn() ? out.y.grad_fn()->name() : ""};
  REQUIRE(out.state.position == state.position + length);
  for (const auto& item : mixer->named_parameters())
    r.grad_parameters[item.key()] = item.value().grad();
  return r;
}

// Fused against reference; returns the fused run's autograd node.
std::string compare(const Setup& s, int64_t batch, int64_t length, bool with_state,
                    double tolerance) {
  INFO(s.mixer << (s.negative ? " negative" : "") << ", d_model " << s.d_model << ", hidden "
               << s.hidden << ", batch " << batch << ", length " << length
               << (with_state ? ", from a state" : ""));
  Mixer fused = build(s, "fused"), reference = build(s, "reference");
  const Run f = run(fused, s, batch, length, with_state);
  const Run r = run(reference, s, batch, length, with_state);
  require_close(f.y, r.y, tolerance, "y");
  require_close(f.state_out, r.state_out, tolerance, "state out");
  require_close(f.grad_x, r.grad_x, tolerance, "grad x");
  require_close(f.grad_state_in, r.grad_state_in, tolerance, "grad state in");
  require_close(f.grad_norm_weight, r.grad_norm_weight, tolerance, "grad norm weight");
  require_close(f.grad_norm_bias, r.grad_norm_bias, tolerance, "grad norm bias");
  for (const auto& [key, grad] : r.grad_parameters)
    require_close(f.grad_parameters.at(key), grad, tolerance, "grad " + key);
  return f.node;
}

const char* const kBlockNode = "GatedBlockFunction";

bool is_block_node(const std::string& node) { return node.find(kBlockNode) != std::string::npos; }

}  // namespace

TEST_CASE("the fused gated block matches norm + reference mixer in float64, every gradient") {
  for (const char* mixer : {"qlstm", "mingru"}) {
    for (const bool negative : {false, true}) {
      // Batch 1; a partial group; two groups, the second partial; hidden unlike d_model.
      for (const auto& [batch, length, d_model, hidden] : std::vector<std::array<int64_t, 4>>{
               {1, 1, 4, 4}, {2, 7, 4, 4}, {17, 5, 4, 4}, {3, 33, 10, 6}, {2, 4, 16, 16}}) {
        for (const bool with_state : {false, true}) {
          const Setup s{mixer, d_model, hidden, negative, torch::kDouble};
          CHECK(is_block_node(compare(s, batch, length, with_state, 1e-9)));
        }
      }
    }
  }
}

TEST_CASE("the fused gated block matches norm + reference mixer in float32 to 1e-4") {
  for (const char* mixer : {"qlstm", "mingru"}) {
    for (const bool negative : {false, true}) {
      const Setup s{mixer, 4, 4, negative, torch::kFloat};
      CHECK(is_block_node(compare(s, 20, 33, true, 1e-4)));
    }
  }
}

TEST_CASE("widths past the gated block's limit compose the norm and the mixer's own nodes") {
  for (const char* mixer : {"qlstm", "mingru"}) {
    const Setup s{mixer, 17, 4, false, torch::kDouble};
    CHECK_FALSE(is_block_node(compare(s, 2, 5, true, 1e-9)));
    const Setup wide_cell{mixer, 4, 17, false, torch::kDouble};
    CHECK_FALSE(is_block_node(compare(wide_cell, 2, 5, true, 1e-9)));
  }
}

TEST_CASE("the fused gated block fed in chunks gives the one-pass outputs") {
  for (const char* mixer : {"qlstm", "mingru"}) {
    INFO(mixer);
    const Setup s{mixer, 4, 4, true, torch::kDouble};
    Mixer m = build(s, "fused");
    torch::NoGradGuard no_grad;
    torch::manual_seed(3);
    const torch::Tensor x = torch::randn({3, 11, 4}, torch::kDouble);
    const ops::PreNorm norm{torch::rand({4}, torch::kDouble) + 0.5,
                            torch::randn({4}, torch::kDouble), 1e-5};
    const MixerOutput whole = m->forward_normed(x, norm, {});
    const MixerOutput first = m->forward_normed(x.narrow(1, 0, 4), norm, {});
    const MixerOutput second = m->forward_normed(x.narrow(1, 4, 7), norm, first.state);
    CHECK(torch::equal(torch::cat({first.y, second.y}, 1), whole.y));
    CHECK(torch::equal(second.state.tensors.at(0), whole.state.tensors.at(0)));
  }
}

TEST_CASE("the fused gated block gives the same bits with one thread and two") {
  const int kept = at::get_num_threads();
  for (const char* mixer : {"qlstm", "mingru"}) {
    INFO(mixer);
    const Setup s{mixer, 4, 4, false, torch::kFloat};
    std::vector<Run> runs;
    for (const int threads : {1, 2}) {
      at::set_num_threads(threads);
      Mixer m = build(s, "fused");
      runs.push_back(run(m, s, 40, 9, true));  // three groups
    }
    at::set_num_threads(kept);
    CHECK(torch::equal(runs[0].y, runs[1].y));
    CHECK(torch::equal(runs[0].grad_x, runs[1].grad_x));
    CHECK(torch::equal(runs[0].grad_state_in, runs[1].grad_state_in));
    CHECK(torch::equal(runs[0].grad_norm_weight, runs[1].grad_norm_weight));
    for (const auto& [key, grad] : runs[1].grad_parameters)
      CHECK(torch::equal(runs[0].grad_parameters.at(key), grad));
  }
}
