#include "runtime/ops/lstm/lstm.h"

#include "kernels/common/block_sum.h"
#include "kernels/lstm/lstm.h"
#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

namespace {

using kernels::LstmShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "fused lstm";

LstmShape shape_of(const torch::Tensor& pre) { return {pre.size(0), pre.size(1), pre.size(2) / 4}; }

// Multiply-adds per batch row, to size the thread pool's chunks.
int64_t work_per_row(LstmShape s) { return s.length * s.gates() * (s.hidden + 4); }

// The kernels' entry points by argument type. CUDA takes float32 only: run_on_device never
// launches double, and check_inputs keeps bfloat16 out, so the template is never reached.
template <typename Args>
bool launch_cuda(const Args&, LstmShape, void*, const char** message) {
  *message = "the fused LSTM's CUDA kernel takes float32";
  return false;
}
bool launch_cuda(const kernels::LstmForward<float>& a, LstmShape s, void* stream,
                 const char** message) {
  return kernels::lstm_forward_cuda(a, s, stream, message);
}
bool launch_cuda(const kernels::LstmBackward<float>& a, LstmShape s, void* stream,
                 const char** message) {
  return kernels::lstm_backward_cuda(a, s, stream, message);
}
template <typename T>
void run_cpu(const kernels::LstmForward<T>& a, LstmShape s, int64_t begin, int64_t end) {
  kernels::lstm_forward_cpu(a, s, begin, end);
}
template <typename T>
void run_cpu(const kernels::LstmBackward<T>& a, LstmShape s, int64_t begin, int64_t end) {
  kernels::lstm_backward_cpu(a, s, begin, end);
}

// One batch row per work item, on the CPU pool or as a CUDA launch on `like`'s stream.
template <typename T, typename Args>
void run(const torch::Tensor& like, LstmShape s, const Args& args) {
  run_on_device<T>(
      kOp, like, s.batch, work_per_row(s),
      [&](int64_t begin, int64_t end) { run_cpu(args, s, begin, end); },
      [&](void* stream, const char** message) { return launch_cuda(args, s, stream, message); });
}

struct Forward {
  torch::Tensor outputs, gates, cells, h_last, c_last;
};

// The gates and cells are kept only when a backward is to come; otherwise one step's gates
// live in a [batch, 4 · hidden] scratch, so a long evaluation holds no per-step gates.
Forward run_forward(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                    const torch::Tensor& h0, const torch::Tensor& c0, bool keep_for_backward) {
  const LstmShape s = shape_of(pre);
  const auto options = pre.options();
  Forward out;
  out.outputs = torch::empty({s.batch, s.length, s.hidden}, options);
  if (keep_for_backward) {
    out.gates = torch::empty({s.batch, s.length, s.gates()}, options);
    out.cells = torch::empty({s.batch, s.length, s.hidden}, options);
  }
  out.h_last = torch::empty({s.batch, s.hidden}, options);
  out.c_last = torch::empty({s.batch, s.hidden}, options);
  const torch::Tensor scratch =
      keep_for_backward ? torch::Tensor() : torch::empty({s.batch, s.gates()}, options);
  const torch::Tensor weight_t = weight_hh.t().contiguous();
  dispatch_element_type(pre, kOp, [&]<typename T>(std::type_identity<T>) {
    if constexpr (!std::is_same_v<T, kernels::Bf16>) {
      const kernels::LstmForward<T> args{
          data<const T>(pre),   data<const T>(weight_t), data<const T>(h0),  data<const T>(c0),
          data<T>(out.outputs), data<T>(out.gates),      data<T>(out.cells), data<T>(out.h_last),
          data<T>(out.c_last),  data<T>(scratch)};
      run<T>(pre, s, args);
    }
  });
  return out;
}

// The per-row partials of W_hh's gradient added in row order (block_sum.h) on the CPU.
torch::Tensor sum_rows(const torch::Tensor& partials) {
  if (partials.is_cuda()) return partials.sum(0);
  const torch::Tensor sum = torch::empty({partials.size(1), partials.size(2)}, partials.options());
  AT_DISPATCH_FLOATING_TYPES(partials.scalar_type(), kOp, [&] {
    kernels::sum_blocks_cpu(data<scalar_t>(partials), partials.size(0),
                            partials.size(1) * partials.size(2), data<scalar_t>(sum));
  });
  return sum;
}

class LstmFunction : public torch::autograd::Function<LstmFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& pre,
                               const torch::Tensor& weight_hh, const torch::Tensor& h0_or_empty,
                               const torch::Tensor& c0_or_empty, bool keep_for_backward) {
    const torch::Tensor h0 = undefined_if_empty(h0_or_empty);
    const torch::Tensor c0 = undefined_if_empty(c0_or_empty);
    Forward out = run_forward(pre, weight_hh, h0, c0, keep_for_backward);
    if (keep_for_backward) {
      ctx->save_for_backward(
          {weight_hh, h0_or_empty, c0_or_empty, out.outputs, out.gates, out.cells});
    }
    return {out.outputs, out.h_last, out.c_last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    TORCH_CHECK(!saved.empty(), kOp, ": backward through a forward that kept nothing");
    const torch::Tensor& weight_hh = saved[0];
    const torch::Tensor h0 = undefined_if_empty(saved[1]);
    const torch::Tensor c0 = undefined_if_empty(saved[2]);
    const torch::Tensor &outputs = saved[3], &gates = saved[4], &cells = saved[5];
    const LstmShape s{outputs.size(0), outputs.size(1), outputs.size(2)};
    const torch::Tensor grad_outputs =
        grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(outputs);
    const torch::Tensor grad_h_last = grads[1].defined() ? grads[1].contiguous() : grads[1];
    const torch::Tensor grad_c_last = grads[2].defined() ? grads[2].contiguous() : grads[2];
    const torch::Tensor grad_pre = torch::empty_like(gates);
    const torch::Tensor partials =
        torch::empty({s.batch, s.gates(), s.hidden}, weight_hh.options());
    const torch::Tensor grad_h0 = h0.defined() ? torch::empty_like(h0) : torch::Tensor();
    const torch::Tensor grad_c0 = c0.defined() ? torch::empty_like(c0) : torch::Tensor();
    const torch::Tensor scratch = torch::empty({s.batch, 4 * s.hidden}, gates.options());
    dispatch_element_type(gates, kOp, [&]<typename T>(std::type_identity<T>) {
      if constexpr (!std::is_same_v<T, kernels::Bf16>) {
        const kernels::LstmBackward<T> args{data<const T>(weight_hh),
                                            data<const T>(h0),
                                            data<const T>(c0),
                                            data<const T>(outputs),
                                            data<const T>(gates),
                                            data<const T>(cells),
                                            data<const T>(grad_outputs),
                                            data<const T>(grad_h_last),
                                            data<const T>(grad_c_last),
                                            data<T>(grad_pre),
                                            data<T>(partials),
                                            data<T>(grad_h0),
                                            data<T>(grad_c0),
                                            data<T>(scratch)};
        run<T>(gates, s, args);
      }
    });
    return {grad_pre, sum_rows(partials), grad_h0, grad_c0, torch::Tensor()};
  }
};

void check_state(const torch::Tensor& state, const char* name, const torch::Tensor& pre,
                 int64_t hidden) {
  TORCH_CHECK(!state.defined() || state.sizes() == torch::IntArrayRef({pre.size(0), hidden}), kOp,
              ": ", name, " must be [", pre.size(0), ", ", hidden, "], got ", state.sizes());
}

}  // namespace

LstmResult lstm_recurrence(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                           const torch::Tensor& h0, const torch::Tensor& c0) {
  TORCH_CHECK(pre.dim() == 3 && pre.size(2) % 4 == 0, kOp,
              ": pre-activations must be [batch, length, 4 · hidden], got ", pre.sizes());
  const int64_t hidden = pre.size(2) / 4;
  TORCH_CHECK(weight_hh.sizes() == torch::IntArrayRef({4 * hidden, hidden}), kOp,
              ": weight_hh must be [", 4 * hidden, ", ", hidden, "], got ", weight_hh.sizes());
  check_state(h0, "h0", pre, hidden);
  check_state(c0, "c0", pre, hidden);
  if (!kernels_take(pre)) return lstm_recurrence_reference(pre, weight_hh, h0, c0);
  std::vector<torch::Tensor> inputs = {pre, weight_hh};
  if (h0.defined()) inputs.push_back(h0);
  if (c0.defined()) inputs.push_back(c0);
  for (const torch::Tensor& t : inputs) check_inputs(kOp, {pre, t});
  bool keep_for_backward = false;
  if (torch::GradMode::is_enabled()) {
    for (const torch::Tensor& t : inputs) keep_for_backward |= t.requires_grad();
  }
  const torch::Tensor p = pre.contiguous();
  const variable_list out = LstmFunction::apply(
      p, weight_hh.contiguous(), present_or_empty(h0.defined() ? h0.contiguous() : h0, p),
      present_or_empty(c0.defined() ? c0.contiguous() : c0, p), keep_for_backward);
  return {out[0], out[1], out[2]};
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
LstmResult lstm_recurrence_reference(const torch::Tensor& pre, const torch::Tensor& weight_hh,
                                     const torch::Tensor& h0, const torch::Tensor& c0) {
  const int64_t hidden = pre.size(2) / 4;
  const auto zeros = [&] { return torch::zeros({pre.size(0), hidden}, pre.options()); };
  torch::Tensor h = h0.defined() ? h0 : zeros();
  torch::Tensor c = c0.defined() ? c0 : zeros();
  std::vector<torch::Tensor> outputs;
  outputs.reserve(static_cast<size_t>(pre.size(1)));
  for (int64_t t = 0; t < pre.size(1); ++t) {
    const std::vector<torch::Tensor> gates =
        (pre.select(1, t) + torch::matmul(h, weight_hh.t())).chunk(4, -1);
    c = torch::sigmoid(gates[1]) * c + torch::sigmoid(gates[0]) * torch::tanh(gates[2]);
    h = torch::sigmoid(gates[3]) * torch::tanh(c);
    outputs.push_back(h);
  }
  return {torch::stack(outputs, 1), h, c};
}

}  // namespace memscript::ops
