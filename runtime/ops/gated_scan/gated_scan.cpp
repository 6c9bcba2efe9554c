#include "runtime/ops/gated_scan/gated_scan.h"

#include "kernels/common/block_sum.h"
#include "kernels/gated_scan/gated_scan.h"
#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

namespace {

using kernels::GatedCellKind;
using kernels::GatedScanShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "fused gated scan";

int slots_of(GatedCellKind kind) { return kernels::gated_slots(kind); }

GatedScanShape shape_of(const torch::Tensor& pre, GatedCellKind kind) {
  return {pre.size(0), pre.size(1), pre.size(2) / slots_of(kind)};
}

// Runs `cpu(begin, end)` over batch rows on the CPU or `cuda(stream, message)` on the GPU.
template <typename T, typename Cpu, typename Cuda>
void run(const torch::Tensor& like, GatedScanShape shape, Cpu&& cpu, Cuda&& cuda) {
  run_on_device<T>(kOp, like, shape.batch, shape.length * shape.hidden * 40, cpu, cuda);
}

struct Forward {
  torch::Tensor states, outputs, last;
};

// The states' options: the accumulation type of pre's dtype (float for bf16).
torch::TensorOptions state_options(const torch::Tensor& pre) {
  return pre.options().dtype(state_dtype(pre.scalar_type()));
}

Forward run_forward(GatedCellKind kind, const torch::Tensor& pre, const torch::Tensor& bias,
                    const torch::Tensor& initial, bool negative) {
  const GatedScanShape shape = shape_of(pre, kind);
  Forward out;
  out.states = torch::empty({shape.batch, shape.length, shape.hidden}, state_options(pre));
  // minGRU's outputs are its states, unless they are kept in another dtype.
  const bool separate_outputs =
      kind == GatedCellKind::qlstm || out.states.scalar_type() != pre.scalar_type();
  out.outputs = separate_outputs ? torch::empty_like(out.states, pre.options()) : out.states;
  out.last = torch::empty({shape.batch, shape.hidden}, state_options(pre));
  dispatch_element_type(pre, kOp, [&]<typename T>(std::type_identity<T>) {
    using Acc = kernels::AccumulatorOf<T>;
    const kernels::GatedScanForward<T> args{data<const T>(pre),
                                            data<const T>(bias),
                                            data<const Acc>(initial),
                                            data<Acc>(out.states),
                                            separate_outputs ? data<T>(out.outputs) : nullptr,
                                            data<Acc>(out.last),
                                            negative};
    run<T>(
        pre, shape,
        [&](auto begin, auto end) {
          kernels::gated_scan_forward_cpu(kind, args, shape, begin, end);
        },
        [&](auto stream, const char** message) {
          return kernels::gated_scan_forward_cuda(kind, args, shape, stream, message);
        });
  });
  return out;
}

// The forget bias's gradient: the f slot of grad_pre summed over batch and length (in a fixed
// order on the CPU: each step's row is one block).
torch::Tensor bias_gradient(const torch::Tensor& grad_pre, GatedScanShape shape) {
  if (grad_pre.is_cuda()) return grad_pre.narrow(2, 0, shape.hidden).sum(torch::IntArrayRef{0, 1});
  const torch::Tensor grad_bias = torch::empty({shape.hidden}, grad_pre.options());
  AT_DISPATCH_FLOATING_TYPES(grad_pre.scalar_type(), kOp, [&] {
    kernels::sum_blocks_cpu(data<scalar_t>(grad_pre), shape.batch * shape.length, shape.hidden,
                            grad_pre.size(2), data<scalar_t>(grad_bias));
  });
  return grad_bias;
}

class GatedScanFunction : public torch::autograd::Function<GatedScanFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& pre,
                               const torch::Tensor& bias_or_empty,
                               const torch::Tensor& initial_or_empty, bool qlstm, bool negative) {
    const GatedCellKind kind = qlstm ? GatedCellKind::qlstm : GatedCellKind::mingru;
    const torch::Tensor bias = undefined_if_empty(bias_or_empty);
    const torch::Tensor initial = undefined_if_empty(initial_or_empty);
    Forward out = run_forward(kind, pre, bias, initial, negative);
    ctx->save_for_backward({pre, bias_or_empty, initial_or_empty, out.states});
    ctx->saved_data["qlstm"] = qlstm;
    ctx->saved_data["negative"] = negative;
    return {out.outputs, out.last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& pre = saved[0];
    const torch::Tensor bias = undefined_if_empty(saved[1]);
    const torch::Tensor initial = undefined_if_empty(saved[2]);
    const torch::Tensor& states = saved[3];
    const GatedCellKind kind =
        ctx->saved_data["qlstm"].toBool() ? GatedCellKind::qlstm : GatedCellKind::mingru;
    const GatedScanShape shape = shape_of(pre, kind);
    const torch::Tensor grad_outputs =
        grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(states, pre.options());
    const torch::Tensor grad_last =
        grads[1].defined() ? grads[1].to(states.scalar_type()).contiguous() : torch::Tensor();
    const torch::Tensor grad_pre = torch::empty_like(pre);
    const torch::Tensor grad_initial = initial.defined() ? torch::empty_like(initial) : initial;
    dispatch_element_type(pre, kOp, [&]<typename T>(std::type_identity<T>) {
      using Acc = kernels::AccumulatorOf<T>;
      const kernels::GatedScanBackward<T> args{data<const T>(pre),
                                               data<const T>(bias),
                                               data<const Acc>(initial),
                                               data<const Acc>(states),
                                               data<const T>(grad_outputs),
                                               data<const Acc>(grad_last),
                                               data<T>(grad_pre),
                                               data<Acc>(grad_initial),
                                               ctx->saved_data["negative"].toBool()};
      run<T>(
          pre, shape,
          [&](auto begin, auto end) {
            kernels::gated_scan_backward_cpu(kind, args, shape, begin, end);
          },
          [&](auto stream, const char** message) {
            return kernels::gated_scan_backward_cuda(kind, args, shape, stream, message);
          });
    });
    const torch::Tensor grad_bias =
        bias.defined() ? bias_gradient(grad_pre, shape) : torch::Tensor();
    return {grad_pre, grad_bias, grad_initial, torch::Tensor(), torch::Tensor()};
  }
};

GatedScanResult apply(GatedCellKind kind, const torch::Tensor& pre, const torch::Tensor& bias,
                      const torch::Tensor& initial, bool negative) {
  TORCH_CHECK(pre.dim() == 3 && pre.size(2) % slots_of(kind) == 0, kOp,
              ": pre-activations must be [batch, length, ", slots_of(kind), " · hidden], got ",
              pre.sizes());
  const int64_t hidden = pre.size(2) / slots_of(kind);
  TORCH_CHECK(!bias.defined() ||
                  (bias.dim() == 1 && bias.size(0) == hidden && bias.device() == pre.device()),
              kOp, ": the bias must be [", hidden, "] on ", pre.device(), ", got ", bias.sizes());
  TORCH_CHECK(!initial.defined() || (initial.sizes() == torch::IntArrayRef({pre.size(0), hidden}) &&
                                     initial.device() == pre.device()),
              kOp, ": the initial state must be [", pre.size(0), ", ", hidden, "] on ",
              pre.device(), ", got ", initial.sizes());
  const torch::Tensor p = pre.contiguous();
  const torch::Tensor b = bias.defined() ? bias.to(p.scalar_type()).contiguous() : bias;
  const torch::Tensor h =
      initial.defined() ? initial.to(state_dtype(p.scalar_type())).contiguous() : initial;
  const variable_list out = GatedScanFunction::apply(
      p, present_or_empty(b, p), present_or_empty(h, p), kind == GatedCellKind::qlstm, negative);
  return {out[0], out[1]};
}

}  // namespace

GatedScanResult qlstm_cell(const torch::Tensor& pre, const torch::Tensor& forget_bias,
                           const torch::Tensor& c0, bool negative_eigenvalues) {
  if (!kernels_take(pre)) return qlstm_cell_reference(pre, forget_bias, c0, negative_eigenvalues);
  return apply(GatedCellKind::qlstm, pre, forget_bias, c0, negative_eigenvalues);
}

GatedScanResult mingru_cell(const torch::Tensor& pre, const torch::Tensor& h0,
                            bool negative_eigenvalues) {
  if (!kernels_take(pre)) return mingru_cell_reference(pre, h0, negative_eigenvalues);
  return apply(GatedCellKind::mingru, pre, torch::Tensor(), h0, negative_eigenvalues);
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
namespace {

// c_t = f_t ⊙ c_{t−1} + u_t over the length axis of [batch, length, hidden] tensors from c
// [batch, hidden] (undefined: zeros): the states after every step.
torch::Tensor diagonal_scan(const torch::Tensor& f, const torch::Tensor& u, torch::Tensor c) {
  if (!c.defined()) c = torch::zeros({f.size(0), f.size(2)}, f.options());
  std::vector<torch::Tensor> states;
  states.reserve(static_cast<size_t>(f.size(1)));
  for (int64_t t = 0; t < f.size(1); ++t) {
    c = f.select(1, t) * c + u.select(1, t);
    states.push_back(c);
  }
  return torch::stack(states, 1);
}

}  // namespace

torch::Tensor qlstm_forget_gate(const torch::Tensor& preactivation, bool negative_eigenvalues) {
  const torch::Tensor gate = torch::sigmoid(preactivation);
  return negative_eigenvalues ? 2 * gate - 1 : gate;
}

GatedScanResult qlstm_cell_reference(const torch::Tensor& pre, const torch::Tensor& forget_bias,
                                     const torch::Tensor& c0, bool negative_eigenvalues) {
  const std::vector<torch::Tensor> gates = pre.chunk(4, -1);
  const torch::Tensor f = qlstm_forget_gate(gates[0] + forget_bias + 1, negative_eigenvalues);
  const torch::Tensor input = torch::sigmoid(gates[1]) * torch::tanh(gates[2]);
  const torch::Tensor c = diagonal_scan(f, input, c0);
  return {torch::sigmoid(gates[3]) * torch::tanh(c), c.select(1, -1)};
}

GatedScanResult mingru_cell_reference(const torch::Tensor& pre, const torch::Tensor& h0,
                                      bool negative_eigenvalues) {
  const std::vector<torch::Tensor> parts = pre.chunk(2, -1);
  const torch::Tensor z = torch::sigmoid(parts[0]);
  const torch::Tensor carry = negative_eigenvalues ? 1 - 2 * z : 1 - z;
  const torch::Tensor h = diagonal_scan(carry, z * parts[1], h0);
  return {h, h.select(1, -1)};
}

}  // namespace memscript::ops
