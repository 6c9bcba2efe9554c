// The fused matrix-state mixers (linear_attention, deltanet, gated_deltanet with impl =
// "fused") against their reference implementations (impl = "reference", composed libtorch
// ops): outputs, final states and every gradient, in float64 and float32; bit-identical results
// whatever the thread count; and a no-grad forward whose memory does not grow with length
// times state size.

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "model_harness.h"
#include "runtime/model/mixers/deltanet.h"
#include "runtime/model/mixers/linear_attention.h"
#include "runtime/ops/delta_rule/delta_rule.h"
#include "runtime/ops/l2_normalize/l2_normalize.h"
#include "runtime/ops/linear_attention/linear_attention.h"

using namespace memscript;

namespace {

struct Tolerance {
  double relative, absolute;
};

Tolerance tolerance_for(torch::ScalarType dtype) {
  return dtype == torch::kDouble ? Tolerance{1e-9, 1e-12} : Tolerance{1e-4, 1e-6};
}

void check_close(const torch::Tensor& fused, const torch::Tensor& reference, Tolerance tolerance,
                 const std::string& what) {
  INFO(what);
  REQUIRE(fused.defined() == reference.defined());
  if (!fused.defined()) return;
  REQUIRE(fused.sizes() == reference.sizes());
  const double scale = reference.abs().max().item<double>();
  const double error = (fused - reference).abs().max().item<double>();
  INFO("max |fused - reference| = " << error << ", max |reference| = " << scale);
  CHECK(error <= tolerance.relative * scale + tolerance.absolute);
}

// Leaves that require grad, so that every gradient can be compared.
torch::Tensor leaf(const torch::Tensor& x) { return x.detach().requires_grad_(true); }

// A fixed random weighting of each result, so the gradients differ from element to element.
torch::Tensor weighted_sum(const std::vector<torch::Tensor>& results) {
  torch::Tensor loss = torch::zeros({}, results.front().options());
  for (size_t n = 0; n < results.size(); ++n) {
    torch::manual_seed(100 + n);
    // randn, not randn_like: the same weights whatever the results' memory layout.
    loss = loss + (results[n] * torch::randn(results[n].sizes(), results[n].options())).sum();
  }
  return loss;
}

std::vector<torch::Tensor> gradients(const torch::Tensor& loss,
                                     const std::vector<torch::Tensor>& inputs) {
  std::vector<torch::Tensor> defined;
  for (const torch::Tensor& x : inputs)
    if (x.defined()) defined.push_back(x);
  return torch::autograd::grad({loss}, defined);
}

struct Shape {
  int64_t batch, heads, length, key_dim, value_dim;
};

const Shape kShapes[] = {{1, 1, 1, 3, 3}, {2, 3, 7, 4, 5}, {3, 2, 33, 4, 4}, {1, 1, 70, 8, 6}};

std::string describe(const Shape& s) {
  std::ostringstream out;
  out << "batch " << s.batch << ", heads " << s.heads << ", length " << s.length << ", dk "
      << s.key_dim << ", dv " << s.value_dim;
  return out.str();
}

// [batch, heads, length, width] seen through a transpose of [batch, length, heads, width], as
// the mixers hand it over.
torch::Tensor head_split(const Shape& s, int64_t width, torch::ScalarType dtype) {
  return torch::randn({s.batch, s.length, s.heads, width}, dtype).transpose(1, 2);
}

struct DeltaInputs {
  torch::Tensor q, k, v, beta, alpha, state;
};

// α of the delta rule's inputs: none, one per head and token, or one per key column.
enum class Decay { none, per_token, per_key };

DeltaInputs delta_inputs(const Shape& s, torch::ScalarType dtype, Decay decay, bool with_state) {
  torch::manual_seed(s.length * 7 + s.batch);
  const auto options = torch::TensorOptions().dtype(dtype);
  DeltaInputs in;
  in.q = leaf(ops::l2_normalize_reference(head_split(s, s.key_dim, dtype)));
  in.k = leaf(ops::l2_normalize_reference(head_split(s, s.key_dim, dtype)));
  in.v = leaf(head_split(s, s.value_dim, dtype));
  in.beta = leaf(2 * torch::rand({s.batch, s.heads, s.length}, options));
  if (decay == Decay::per_token)
    in.alpha = leaf(0.5 + 0.5 * torch::rand({s.batch, s.heads, s.length}, options));
  if (decay == Decay::per_key)  // a head-split view, as a gate projection hands it over
    in.alpha = leaf(0.5 + 0.5 * torch::rand({s.batch, s.length, s.heads, s.key_dim}, options))
                   .transpose(1, 2);
  if (with_state)
    in.state = leaf(torch::randn({s.batch, s.heads, s.value_dim, s.key_dim}, options));
  return in;
}

void compare_delta_rule(const Shape& s, torch::ScalarType dtype, Decay decay, bool with_state,
                        ops::StateUpdate update = ops::StateUpdate::delta) {
  INFO(describe(s) << ", dtype " << dtype << ", decay " << int(decay) << ", initial state "
                   << with_state << ", additive " << (update == ops::StateUpdate::additive));
  const DeltaInputs in = delta_inputs(s, dtype, decay, with_state);
  const std::vector<torch::Tensor> leaves{in.q, in.k, in.v, in.beta, in.alpha, in.state};
  const ops::DeltaRuleResult fused =
      ops::delta_rule(in.q, in.k, in.v, in.beta, in.alpha, in.state, update);
  const ops::DeltaRuleResult reference =
      ops::delta_rule_reference(in.q, in.k, in.v, in.beta, in.alpha, in.state, update);
  const Tolerance tolerance = tolerance_for(dtype);
  check_close(fused.outputs, reference.outputs, tolerance, "outputs");
  check_close(fused.state, reference.state, tolerance, "final state");
  const auto fused_grads = gradients(weighted_sum({fused.outputs, fused.state}), leaves);
  const auto reference_grads =
      gradients(weighted_sum({reference.outputs, reference.state}), leaves);
  const char* names[] = {"grad q", "grad k", "grad v", "grad beta", "grad alpha", "grad state"};
  for (size_t n = 0; n < fused_grads.size(); ++n)
    check_close(fused_grads[n], reference_grads[n], tolerance, names[n]);
}

struct LinearInputs {
  torch::Tensor phi_q, phi_k, v, sum, normaliser;
};

LinearInputs linear_inputs(const Shape& s, torch::ScalarType dtype, bool with_state) {
  torch::manual_seed(s.length * 5 + s.heads);
  const auto options = torch::TensorOptions().dtype(dtype);
  LinearInputs in;
  in.phi_q = leaf(torch::elu(head_split(s, s.key_dim, dtype)) + 1);
  in.phi_k = leaf(torch::elu(head_split(s, s.key_dim, dtype)) + 1);
  in.v = leaf(head_split(s, s.value_dim, dtype));
  if (with_state) {
    in.sum = leaf(torch::randn({s.batch, s.heads, s.key_dim, s.value_dim}, options));
    in.normaliser = leaf(torch::rand({s.batch, s.heads, s.key_dim}, options));
  }
  return in;
}

void compare_linear_attention(const Shape& s, torch::ScalarType dtype, bool with_state) {
  INFO(describe(s) << ", dtype " << dtype << ", initial state " << with_state);
  const LinearInputs in = linear_inputs(s, dtype, with_state);
  const double eps = 1e-6;
  const std::vector<torch::Tensor> leaves{in.phi_q, in.phi_k, in.v, in.sum, in.normaliser};
  const ops::LinearAttentionResult fused =
      ops::linear_attention(in.phi_q, in.phi_k, in.v, in.sum, in.normaliser, eps);
  const ops::LinearAttentionResult reference =
      ops::linear_attention_reference(in.phi_q, in.phi_k, in.v, in.sum, in.normaliser, eps);
  const Tolerance tolerance = tolerance_for(dtype);
  check_close(fused.outputs, reference.outputs, tolerance, "outputs");
  check_close(fused.sum, reference.sum, tolerance, "final sum");
  check_close(fused.normaliser, reference.normaliser, tolerance, "final normaliser");
  const auto fused_grads =
      gradients(weighted_sum({fused.outputs, fused.sum, fused.normaliser}), leaves);
  const auto reference_grads =
      gradients(weighted_sum({reference.outputs, reference.sum, reference.normaliser}), leaves);
  const char* names[] = {"grad phi_q", "grad phi_k", "grad v", "grad sum", "grad normaliser"};
  for (size_t n = 0; n < fused_grads.size(); ++n)
    check_close(fused_grads[n], reference_grads[n], tolerance, names[n]);
}

}  // namespace

TEST_CASE("fused delta rule matches the reference in outputs, final state and all gradients") {
  const torch::ScalarType dtype = GENERATE(torch::kDouble, torch::kFloat);
  for (const Shape& s : kShapes)
    for (const Decay decay : {Decay::none, Decay::per_token, Decay::per_key})
      for (const bool with_state : {false, true}) compare_delta_rule(s, dtype, decay, with_state);
}

TEST_CASE("fused additive update (retnet) matches the reference in outputs, state and gradients") {
  const torch::ScalarType dtype = GENERATE(torch::kDouble, torch::kFloat);
  for (const Shape& s : kShapes)
    for (const Decay decay : {Decay::none, Decay::per_token, Decay::per_key})
      for (const bool with_state : {false, true})
        compare_delta_rule(s, dtype, decay, with_state, ops::StateUpdate::additive);
}

TEST_CASE("the additive update with a fixed decay is retention's parallel form") {
  // o_t = Σ_{s≤t} γ^(t−s) β_s (q_t·k_s) v_s (Sun et al. 2023, eq. 5 with β folded into v).
  const Shape s = kShapes[1];
  const DeltaInputs in = delta_inputs(s, torch::kDouble, Decay::none, false);
  const torch::Tensor gamma = torch::tensor({0.9, 0.5, 0.99}, torch::kDouble);
  REQUIRE(gamma.size(0) == s.heads);
  const torch::Tensor alpha =
      gamma.view({1, s.heads, 1}).expand({s.batch, s.heads, s.length}).contiguous();
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    const auto additive = ops::StateUpdate::additive;
    const ops::DeltaRuleResult out =
        fused ? ops::delta_rule(in.q, in.k, in.v, in.beta, alpha, {}, additive)
              : ops::delta_rule_reference(in.q, in.k, in.v, in.beta, alpha, {}, additive);
    const torch::Tensor t = torch::arange(s.length, torch::kDouble);
    const torch::Tensor gap = t.unsqueeze(1) - t.unsqueeze(0);  // t − s
    const torch::Tensor weights =
        torch::where(gap >= 0, torch::pow(gamma.view({s.heads, 1, 1}), gap.clamp_min(0)),
                     torch::zeros({1}, torch::kDouble));
    const torch::Tensor scores = torch::matmul(in.q, in.k.transpose(-1, -2)) * weights;
    const torch::Tensor expected = torch::matmul(scores, in.beta.unsqueeze(-1) * in.v);
    CHECK(torch::allclose(out.outputs, expected, 1e-10, 1e-12));
  }
}

TEST_CASE("fused linear attention matches the reference in outputs, state and all gradients") {
  const torch::ScalarType dtype = GENERATE(torch::kDouble, torch::kFloat);
  // Longer than the reference's blocks of 64 as well.
  for (const Shape& s : {kShapes[0], kShapes[1], kShapes[2], kShapes[3], Shape{2, 2, 150, 3, 4}})
    for (const bool with_state : {false, true}) compare_linear_attention(s, dtype, with_state);
}

TEST_CASE("the matrix-state ops run their reference on tensors the kernels do not take") {
  // bfloat16 on the CPU has no kernel (ops::kernels_take): the op's one fallback is its
  // reference, the same bits as calling the reference.
  const Shape s = kShapes[1];
  const DeltaInputs d = delta_inputs(s, torch::kFloat, Decay::per_token, true);
  const auto bf16 = [](const torch::Tensor& x) { return x.to(torch::kBFloat16); };
  const ops::DeltaRuleResult delta =
      ops::delta_rule(bf16(d.q), bf16(d.k), bf16(d.v), bf16(d.beta), bf16(d.alpha), bf16(d.state));
  const ops::DeltaRuleResult delta_reference = ops::delta_rule_reference(
      bf16(d.q), bf16(d.k), bf16(d.v), bf16(d.beta), bf16(d.alpha), bf16(d.state));
  CHECK(delta.outputs.scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(delta.outputs, delta_reference.outputs));
  CHECK(torch::equal(delta.state, delta_reference.state));
  const LinearInputs l = linear_inputs(s, torch::kFloat, true);
  const ops::LinearAttentionResult linear = ops::linear_attention(
      bf16(l.phi_q), bf16(l.phi_k), bf16(l.v), bf16(l.sum), bf16(l.normaliser), 1e-6);
  const ops::LinearAttentionResult linear_reference = ops::linear_attention_reference(
      bf16(l.phi_q), bf16(l.phi_k), bf16(l.v), bf16(l.sum), bf16(l.normaliser), 1e-6);
  CHECK(torch::equal(linear.outputs, linear_reference.outputs));
  CHECK(torch::equal(linear.sum, linear_reference.sum));
  CHECK(torch::equal(linear.normaliser, linear_reference.normaliser));
}

TEST_CASE("fused matrix-state ops give the same bits with one thread and with two") {
  const Shape s{4, 4, 64, 8, 8};
  const auto run = [&](int threads) {
    at::set_num_threads(threads);
    const DeltaInputs d = delta_inputs(s, torch::kFloat, Decay::per_token, true);
    const ops::DeltaRuleResult delta = ops::delta_rule(d.q, d.k, d.v, d.beta, d.alpha, d.state);
    std::vector<torch::Tensor> results{delta.outputs, delta.state};
    for (const torch::Tensor& g : gradients(weighted_sum({delta.outputs, delta.state}),
                                            {d.q, d.k, d.v, d.beta, d.alpha, d.state}))
      results.push_back(g);
    const LinearInputs l = linear_inputs(s, torch::kFloat, true);
    const ops::LinearAttentionResult linear =
        ops::linear_attention(l.phi_q, l.phi_k, l.v, l.sum, l.normaliser, 1e-6);
    results.push_back(linear.outputs);
    for (const torch::Tensor& g :
         gradients(weighted_sum({linear.outputs, linear.sum, linear.normaliser}),
                   {l.phi_q, l.phi_k, l.v, l.sum, l.normaliser}))
      results.push_back(g);
    return results;
  };
  const int before = at::get_num_threads();
  const std::vector<torch::Tensor> one = run(1), two = run(2);
  at::set_num_threads(before);
  REQUIRE(one.size() == two.size());
  for (size_t n = 0; n < one.size(); ++n) {
    INFO("result " << n);
    CHECK(torch::equal(one[n], two[n]));
  }
}

namespace {

Mixer make_matrix_mixer(const std::string& name, const std::string& impl, uint64_t seed) {
  Options options("test");
  options.set("impl", {impl});
  if (name != "linear_attention") options.set("negative_eigenvalues", {true});
  torch::manual_seed(seed);
  Mixer mixer = make_mixer(name, MixerContext{12, 3, 2}, options);
  options.finish();
  mixer->to(torch::kDouble);
  return mixer;
}

}  // namespace

TEST_CASE("fused matrix mixers match their reference in outputs, states and every gradient") {
  const std::string name =
      GENERATE(as<std::string>{}, "linear_attention", "deltanet", "gated_deltanet");
  const int64_t length = GENERATE(1, 9);
  INFO(name << ", length " << length);
  Mixer fused_mixer = make_matrix_mixer(name, "fused", 3);
  Mixer reference_mixer = make_matrix_mixer(name, "reference", 3);
  CHECK(fused_mixer->config().at("impl") == "fused");
  CHECK(reference_mixer->config().at("impl") == "reference");
  torch::manual_seed(4);
  const torch::Tensor prefix = torch::randn({2, 5, 12}, torch::kDouble);
  const torch::Tensor x = torch::randn({2, length, 12}, torch::kDouble);
  // The state a previous chunk left, as a leaf, so its gradient is compared too.
  const MixerState carried = reference_mixer->forward(prefix, MixerState{}).state;
  const auto run = [&](Mixer& mixer) {
    MixerState state{{}, carried.position};
    for (const torch::Tensor& s : carried.tensors) state.tensors.push_back(leaf(s));
    const torch::Tensor input = leaf(x);
    const MixerOutput out = mixer->forward(input, state);
    std::vector<torch::Tensor> results{out.y};
    for (const torch::Tensor& s : out.state.tensors) results.push_back(s);
    std::vector<torch::Tensor> wrt{input};
    for (const torch::Tensor& s : state.tensors) wrt.push_back(s);
    for (const torch::Tensor& p : mixer->parameters()) wrt.push_back(p);
    for (const torch::Tensor& g : gradients(weighted_sum(results), wrt)) results.push_back(g);
    return results;
  };
  const std::vector<torch::Tensor> fused = run(fused_mixer), reference = run(reference_mixer);
  REQUIRE(fused.size() == reference.size());
  for (size_t n = 0; n < fused.size(); ++n)
    check_close(fused[n], reference[n], tolerance_for(torch::kDouble),
                "result " + std::to_string(n));
}

TEST_CASE("fused and reference matrix mixers continue each other's state across chunks") {
  const std::string name =
      GENERATE(as<std::string>{}, "linear_attention", "deltanet", "gated_deltanet");
  INFO(name);
  Mixer fused_mixer = make_matrix_mixer(name, "fused", 5);
  Mixer reference_mixer = make_matrix_mixer(name, "reference", 5);
  torch::NoGradGuard no_grad;
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({3, 13, 12}, torch::kDouble);
  const torch::Tensor whole = reference_mixer->forward(x, MixerState{}).y;
  const MixerOutput first = reference_mixer->forward(x.narrow(1, 0, 6), {});
  const MixerOutput second = fused_mixer->forward(x.narrow(1, 6, 7), first.state);
  const MixerOutput third = fused_mixer->forward(x.narrow(1, 0, 4), {});
  const MixerOutput fourth = reference_mixer->forward(x.narrow(1, 4, 9), third.state);
  check_close(torch::cat({first.y, second.y}, 1), whole, tolerance_for(torch::kDouble),
              "reference then fused");
  check_close(torch::cat({third.y, fourth.y}, 1), whole, tolerance_for(torch::kDouble),
              "fused then reference");
  CHECK(second.state.position == 13);
}

namespace {

// Peak resident memory of this process in bytes (VmHWM), or -1 where /proc does not say.
int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// Lowers the peak to the current resident size, so what follows measures only itself.
bool reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

// How far the peak rises above the memory in use before `body` runs.
template <typename F>
int64_t peak_growth(F&& body) {
  reset_peak();
  const int64_t before = peak_resident_bytes();
  body();
  return peak_resident_bytes() - before;
}

}  // namespace

TEST_CASE("a no-grad fused forward keeps one state per head, not one per token") {
  // Batch 2, 4 heads, head_dim 16, length 16384: the outputs are 8 MiB; a state per token would
  // be 16 times that (128 MiB).
  const Shape s{2, 4, 16384, 16, 16};
  torch::NoGradGuard no_grad;
  torch::manual_seed(8);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor q =
      ops::l2_normalize_reference(torch::randn({s.batch, s.heads, s.length, 16}, options));
  const torch::Tensor k =
      ops::l2_normalize_reference(torch::randn({s.batch, s.heads, s.length, 16}, options));
  const torch::Tensor v = torch::randn({s.batch, s.heads, s.length, 16}, options);
  const torch::Tensor beta = torch::rand({s.batch, s.heads, s.length}, options);
  const int64_t outputs_bytes = v.numel() * 4;
  const int64_t per_token_states_bytes = outputs_bytes * 16;
  if (!reset_peak() || peak_resident_bytes() < 0) {
    WARN("this system cannot reset the peak resident size: nothing measured");
    return;
  }
  // The instrument first: a tensor the size of all states must show.
  const int64_t seen = peak_growth([&] { torch::zeros({per_token_states_bytes / 4}, options); });
  REQUIRE(seen >= per_token_states_bytes * 9 / 10);
  torch::Tensor delta_outputs, linear_outputs;
  const int64_t delta =
      peak_growth([&] { delta_outputs = ops::delta_rule(q, k, v, beta, beta, {}).outputs; });
  const int64_t linear = peak_growth(
      [&] { linear_outputs = ops::linear_attention(q.abs(), k.abs(), v, {}, {}, 1e-6).outputs; });
  INFO("peak growth: delta rule " << delta << " B, linear attention " << linear << " B, outputs "
                                  << outputs_bytes << " B");
  // The outputs, two feature maps (linear attention), and slack for the allocator.
  CHECK(delta <= outputs_bytes + (8 << 20));
  CHECK(linear <= 3 * outputs_bytes + (8 << 20));
}
