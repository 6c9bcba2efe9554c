// impl = "fused" against impl = "reference" for the diagonal mixers (qlstm, mingru, lru, mamba)
// and the LSTM (kernels/lstm/lstm.h against libtorch's LSTM):
// outputs, final states and every gradient (input, initial state, parameters), in float64 to
// 1e-9 and float32 to 1e-4. Also: the fused ops give bit-identical results at any thread count,
// and the fused Mamba scan without gradients never allocates [batch, length, d_inner, d_state].

#include <catch2/catch.hpp>

#include <c10/core/CPUAllocator.h>

#include "model_harness.h"
#include "runtime/model/mixer.h"
#include "runtime/ops/complex_scan/complex_scan.h"
#include "runtime/ops/gated_scan/gated_scan.h"
#include "runtime/ops/lstm/lstm.h"
#include "runtime/ops/selective_scan/selective_scan.h"

using namespace memscript;
using memscript::test::relative_error;
using memscript::test::require_close;

namespace {

// d_model 10: Mamba's d_inner 20 spans two backward channel groups of 16.
const MixerContext kContext{10, 2, 1};

Mixer build(const std::string& name, const std::string& impl, bool negative, torch::Dtype dtype) {
  Options options("test mixer");
  options.set("impl", {impl});
  if (find_mixer(name)->negative_eigenvalues) options.set("negative_eigenvalues", {negative});
  if (name == "mamba") {
    options.set("d_state", {int64_t{3}});
    options.set("d_conv", {int64_t{3}});
  }
  if (name == "lru") options.set("r_min", {0.4});  // some channels near the unit circle
  torch::manual_seed(5);
  Mixer mixer = make_mixer(name, kContext, options);
  options.finish();
  mixer->to(dtype);
  return mixer;
}

// The same mixer twice, fused and reference, with the reference's weights in both.
std::pair<Mixer, Mixer> twins(const std::string& name, bool negative, torch::Dtype dtype) {
  Mixer fused = build(name, "fused", negative, dtype);
  Mixer reference = build(name, "reference", negative, dtype);
  torch::NoGradGuard no_grad;
  auto fused_parameters = fused->named_parameters();
  for (const auto& item : reference->named_parameters())
    fused_parameters[item.key()].copy_(item.value());
  return {fused, reference};
}

struct Run {
  torch::Tensor y;
  std::vector<torch::Tensor> state_out, grad_state_in;
  torch::Tensor grad_x;
  std::map<std::string, torch::Tensor> grad_parameters;
};

// One chunk from `state` (leaves requiring grad), with a loss that weighs every output and
// every final state tensor.
Run run(Mixer& mixer, const torch::Tensor& x_in, const MixerState& state_in, uint64_t seed) {
  mixer->zero_grad();
  const torch::Tensor x = x_in.clone().requires_grad_(true);
  MixerState state = state_in;
  for (torch::Tensor& t : state.tensors) t = t.clone().requires_grad_(true);
  const MixerOutput out = mixer->forward(x, state);
  torch::manual_seed(seed);
  torch::Tensor loss = (out.y * torch::randn_like(out.y)).sum();
  for (const torch::Tensor& t : out.state.tensors) loss = loss + (t * torch::randn_like(t)).sum();
  loss.backward();
  Run r{out.y.detach(), {}, {}, x.grad(), {}};
  for (const torch::Tensor& t : out.state.tensors) r.state_out.push_back(t.detach());
  for (const torch::Tensor& t : state.tensors) r.grad_state_in.push_back(t.grad());
  for (const auto& item : mixer->named_parameters())
    r.grad_parameters[item.key()] = item.value().grad();
  return r;
}

void compare(const std::string& name, bool negative, torch::Dtype dtype, int64_t batch,
             int64_t length, bool with_state, double tolerance) {
  INFO(name << (negative ? " negative" : "") << ", batch " << batch << ", length " << length
            << (with_state ? ", from a state" : ""));
  auto [fused, reference] = twins(name, negative, dtype);
  torch::manual_seed(7);
  const auto options = torch::TensorOptions().dtype(dtype);
  const torch::Tensor x = torch::randn({batch, length, kContext.d_model}, options);
  MixerState state;
  if (with_state) {
    torch::NoGradGuard no_grad;
    state = reference->forward(torch::randn({batch, 5, kContext.d_model}, options), {}).state;
  }
  const Run f = run(fused, x, state, 9), r = run(reference, x, state, 9);
  require_close(f.y, r.y, tolerance, "y");
  require_close(f.grad_x, r.grad_x, tolerance, "grad x");
  REQUIRE(f.state_out.size() == r.state_out.size());
  for (size_t i = 0; i < r.state_out.size(); ++i) {
    require_close(f.state_out[i], r.state_out[i], tolerance, "state out " + std::to_string(i));
  }
  for (size_t i = 0; i < r.grad_state_in.size(); ++i) {
    require_close(f.grad_state_in[i], r.grad_state_in[i], tolerance,
                  "grad state in " + std::to_string(i));
  }
  for (const auto& [key, grad] : r.grad_parameters) {
    require_close(f.grad_parameters.at(key), grad, tolerance, "grad " + key);
  }
}

const char* const kDiagonalMixers[] = {"qlstm", "mingru", "lru", "mamba"};

}  // namespace

TEST_CASE("fused diagonal mixers match the reference in float64: outputs, states, all gradients") {
  for (const char* name : kDiagonalMixers) {
    for (const bool negative : {false, true}) {
      for (const auto& [batch, length] :
           std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 7}, {3, 16}}) {
        for (const bool with_state : {false, true}) {
          compare(name, negative, torch::kDouble, batch, length, with_state, 1e-9);
        }
      }
    }
  }
}

TEST_CASE("fused diagonal mixers match the reference in float32 to 1e-4") {
  for (const char* name : kDiagonalMixers) {
    for (const bool negative : {false, true}) {
      compare(name, negative, torch::kFloat, 2, 33, true, 1e-4);
    }
  }
}

TEST_CASE("fused diagonal mixers fed in chunks give the one-pass outputs") {
  for (const char* name : kDiagonalMixers) {
    INFO(name);
    Mixer mixer = build(name, "fused", true, torch::kDouble);
    torch::NoGradGuard no_grad;
    torch::manual_seed(3);
    const torch::Tensor x = torch::randn({2, 11, kContext.d_model}, torch::kDouble);
    const MixerOutput whole = mixer->forward(x, {});
    MixerOutput first = mixer->forward(x.narrow(1, 0, 4), {});
    const MixerOutput second = mixer->forward(x.narrow(1, 4, 7), first.state);
    CHECK(relative_error(torch::cat({first.y, second.y}, 1), whole.y) < 1e-12);
  }
}

TEST_CASE("fused lstm matches libtorch's LSTM in float64: outputs, states, all gradients") {
  for (const auto& [batch, length] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 7}, {3, 16}}) {
    for (const bool with_state : {false, true}) {
      compare("lstm", false, torch::kDouble, batch, length, with_state, 1e-9);
    }
  }
}

TEST_CASE("fused lstm matches libtorch's LSTM in float32 to 1e-4") {
  compare("lstm", false, torch::kFloat, 2, 33, true, 1e-4);
}

TEST_CASE("fused lstm fed in chunks gives the one-pass outputs, and chunks may switch impl") {
  Mixer fused = build("lstm", "fused", false, torch::kDouble);
  Mixer reference = build("lstm", "reference", false, torch::kDouble);
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 11, kContext.d_model}, torch::kDouble);
  const MixerOutput whole = fused->forward(x, {});
  const MixerOutput first = fused->forward(x.narrow(1, 0, 4), {});
  const MixerOutput second = fused->forward(x.narrow(1, 4, 7), first.state);
  CHECK(relative_error(torch::cat({first.y, second.y}, 1), whole.y) < 1e-12);
  const MixerOutput switched = reference->forward(x.narrow(1, 4, 7), first.state);
  CHECK(relative_error(switched.y, second.y) < 1e-9);
}

TEST_CASE("lstm and gpt accept impl fused and reference and report it") {
  for (const std::string name : {"lstm", "gpt"}) {
    for (const std::string impl : {"fused", "reference"}) {
      Options options("test mixer");
      options.set("impl", {impl});
      const Mixer mixer = make_mixer(name, kContext, options);
      options.finish();
      CHECK(mixer->config()["impl"] == impl);
    }
  }
}

TEST_CASE("an unknown impl names the option, the value and the choices") {
  Options options("test mixer");
  options.set("impl", {std::string("fast")});
  CHECK_THROWS_WITH(make_mixer("qlstm", kContext, options),
                    Catch::Matchers::Contains("impl") && Catch::Matchers::Contains("fast") &&
                        Catch::Matchers::Contains("reference"));
}

namespace {

// Forward and backward of every fused op at the given thread count, all results in one list.
std::vector<torch::Tensor> fused_ops_with_threads(int threads) {
  const int kept = at::get_num_threads();
  at::set_num_threads(threads);
  torch::manual_seed(11);
  const int64_t B = 16, L = 40, C = 48, N = 8;
  std::vector<torch::Tensor> leaves = {
      torch::randn({B, L, 4 * C}),    torch::randn({C}),       torch::randn({B, C}),
      torch::rand({C}) * 0.9,         torch::rand({C}) * 0.3,  torch::randn({B, L, C}),
      torch::randn({B, L, C}),        torch::randn({B, C}),    torch::randn({B, C}),
      torch::randn({B, L, C}),        torch::rand({B, L, C}),  -torch::rand({C, N}) - 0.1,
      torch::randn({B, L, N}),        torch::randn({B, L, N}), torch::randn({B, C, N}),
      torch::randn({B, L, 2 * C}),    torch::randn({B, C}),    torch::randn({B, L, 4 * N}),
      torch::randn({4 * N, N}) * 0.3, torch::randn({B, N}),    torch::randn({B, N})};
  for (torch::Tensor& t : leaves) t.requires_grad_(true);
  const ops::GatedScanResult q = ops::qlstm_cell(leaves[0], leaves[1], leaves[2], true);
  const ops::GatedScanResult g = ops::mingru_cell(leaves[15], leaves[16], false);
  const ops::ComplexScanResult c =
      ops::complex_scan(leaves[3], leaves[4], leaves[5], leaves[6], leaves[7], leaves[8]);
  const ops::SelectiveScanResult s = ops::selective_scan(leaves[9], leaves[10], leaves[11],
                                                         leaves[12], leaves[13], leaves[14], true);
  const ops::LstmResult l = ops::lstm_recurrence(leaves[17], leaves[18], leaves[19], leaves[20]);
  std::vector<torch::Tensor> outputs = {q.outputs, q.last,    g.outputs, g.last, c.h_re,
                                        c.h_im,    c.last_re, c.last_im, s.y,    s.h_last,
                                        l.outputs, l.h_last,  l.c_last};
  torch::Tensor loss = torch::zeros({});
  for (const torch::Tensor& t : outputs) loss = loss + (t * t.detach().cos()).sum();
  loss.backward();
  for (const torch::Tensor& t : leaves) outputs.push_back(t.grad());
  at::set_num_threads(kept);
  return outputs;
}

// Wraps the CPU allocator to record the largest single allocation while it is installed.
class LargestAllocation : public c10::Allocator {
 public:
  LargestAllocation() : inner_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(this, 100); }
  ~LargestAllocation() override { c10::SetCPUAllocator(inner_, 100); }
  c10::DataPtr allocate(size_t n) override {
    largest = std::max(largest, n);
    return inner_->allocate(n);
  }
  // Allocations are the inner allocator's own, so they free (raw or not) as before.
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  size_t largest = 0;

 private:
  c10::Allocator* inner_;
};

size_t largest_allocation_of_mamba_eval(const std::string& impl, int64_t batch, int64_t length,
                                        int64_t d_state) {
  Options options("test mixer");
  options.set("impl", {impl});
  options.set("d_state", {d_state});
  const MixerContext context{16, 2, 1};  // d_inner 32
  Mixer mixer = make_mixer("mamba", context, options);
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({batch, length, context.d_model});
  LargestAllocation counter;
  mixer->forward(x, {});
  return counter.largest;
}

}  // namespace

TEST_CASE("fused ops give bit-identical results and gradients with 1 and 2 threads") {
  const std::vector<torch::Tensor> one = fused_ops_with_threads(1), two = fused_ops_with_threads(2);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("tensor " << i);
    CHECK(torch::equal(one[i], two[i]));
  }
}

TEST_CASE("fused mamba evaluation never allocates [batch, length, d_inner, d_state]") {
  const int64_t batch = 2, length = 1024, d_inner = 32, d_state = 32;
  const size_t full_states = sizeof(float) * batch * length * d_inner * d_state;
  // The counter sees it when it is there: the reference forms exactly that tensor.
  CHECK(largest_allocation_of_mamba_eval("reference", batch, length, d_state) >= full_states);
  // The fused scan's largest allocation is a [batch, length, 2·d_inner] projection.
  CHECK(largest_allocation_of_mamba_eval("fused", batch, length, d_state) <= full_states / 8);
}

TEST_CASE("the selective scan op runs its reference on tensors the kernels do not take") {
  // bfloat16 on the CPU has no kernel (ops::kernels_take): the op's one fallback is its
  // reference, the same bits as calling the reference.
  torch::manual_seed(5);
  const int64_t B = 2, L = 6, C = 3, N = 4;
  const auto bf16 = [](const torch::Tensor& x) { return x.to(torch::kBFloat16); };
  const torch::Tensor u = bf16(torch::randn({B, L, C})), delta = bf16(torch::rand({B, L, C}));
  const torch::Tensor A = bf16(-torch::rand({C, N}) - 0.1), h0 = bf16(torch::randn({B, C, N}));
  const torch::Tensor Bm = bf16(torch::randn({B, L, N})), Cm = bf16(torch::randn({B, L, N}));
  for (const bool negative : {false, true}) {
    const ops::SelectiveScanResult op = ops::selective_scan(u, delta, A, Bm, Cm, h0, negative);
    const ops::SelectiveScanResult reference =
        ops::selective_scan_reference(u, delta, A, Bm, Cm, h0, negative);
    CHECK(op.y.scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(op.y, reference.y));
    CHECK(torch::equal(op.h_last, reference.h_last));
  }
}

TEST_CASE("the complex scan, gated scan and LSTM ops run their references where kernels do not") {
  // bfloat16 on the CPU has no kernel: each op's one fallback is its own reference.
  torch::manual_seed(6);
  const int64_t B = 2, L = 5, C = 3;
  const auto bf16 = [](const torch::Tensor& x) { return x.to(torch::kBFloat16); };
  const auto same = [](const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].scalar_type() != torch::kBFloat16 || !torch::equal(a[i], b[i])) return false;
    }
    return true;
  };
  const torch::Tensor lre = bf16(torch::rand({C}) * 0.9), lim = bf16(torch::rand({C}) * 0.3);
  const torch::Tensor bre = bf16(torch::randn({B, L, C})), bim = bf16(torch::randn({B, L, C}));
  const torch::Tensor hre = bf16(torch::randn({B, C})), him = bf16(torch::randn({B, C}));
  const ops::ComplexScanResult c = ops::complex_scan(lre, lim, bre, bim, hre, him);
  const ops::ComplexScanResult cr = ops::complex_scan_reference(lre, lim, bre, bim, hre, him);
  CHECK(same({c.h_re, c.h_im, c.last_re, c.last_im}, {cr.h_re, cr.h_im, cr.last_re, cr.last_im}));

  const torch::Tensor pre4 = bf16(torch::randn({B, L, 4 * C})), bias = bf16(torch::randn({C}));
  const torch::Tensor state = bf16(torch::randn({B, C}));
  const ops::GatedScanResult q = ops::qlstm_cell(pre4, bias, state, true);
  const ops::GatedScanResult qr = ops::qlstm_cell_reference(pre4, bias, state, true);
  CHECK(same({q.outputs, q.last}, {qr.outputs, qr.last}));
  const torch::Tensor pre2 = bf16(torch::randn({B, L, 2 * C}));
  const ops::GatedScanResult g = ops::mingru_cell(pre2, state, false);
  const ops::GatedScanResult gr = ops::mingru_cell_reference(pre2, state, false);
  CHECK(same({g.outputs, g.last}, {gr.outputs, gr.last}));

  const torch::Tensor w_hh = bf16(torch::randn({4 * C, C}) * 0.3), c0 = bf16(torch::randn({B, C}));
  const ops::LstmResult l = ops::lstm_recurrence(pre4, w_hh, state, c0);
  const ops::LstmResult lr = ops::lstm_recurrence_reference(pre4, w_hh, state, c0);
  CHECK(same({l.outputs, l.h_last, l.c_last}, {lr.outputs, lr.h_last, lr.c_last}));
}

TEST_CASE("the LSTM op matches its step-by-step reference in float64: outputs and gradients") {
  torch::manual_seed(12);
  const int64_t B = 3, L = 7, H = 5;
  const auto run = [&](bool kernel) {
    torch::manual_seed(12);
    std::vector<torch::Tensor> leaves = {
        torch::randn({B, L, 4 * H}, torch::kDouble), torch::randn({4 * H, H}, torch::kDouble) * 0.3,
        torch::randn({B, H}, torch::kDouble), torch::randn({B, H}, torch::kDouble)};
    for (torch::Tensor& t : leaves) t.requires_grad_(true);
    const ops::LstmResult r =
        kernel ? ops::lstm_recurrence(leaves[0], leaves[1], leaves[2], leaves[3])
               : ops::lstm_recurrence_reference(leaves[0], leaves[1], leaves[2], leaves[3]);
    std::vector<torch::Tensor> out = {r.outputs, r.h_last, r.c_last};
    torch::Tensor loss = torch::zeros({}, torch::kDouble);
    for (const torch::Tensor& t : out) loss = loss + (t * t.detach().cos()).sum();
    loss.backward();
    for (torch::Tensor& t : out) t = t.detach();
    for (const torch::Tensor& t : leaves) out.push_back(t.grad());
    return out;
  };
  const std::vector<torch::Tensor> kernel = run(true), reference = run(false);
  for (size_t i = 0; i < kernel.size(); ++i) {
    INFO("tensor " << i);
    CHECK(torch::allclose(kernel[i], reference[i], 1e-10, 1e-12));
  }
}
