#include "runtime/ops/delta_rule/delta_rule.h"

#include <cmath>

#include "kernels/delta_rule/delta_rule.h"
#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

namespace {

using kernels::DeltaRuleBackward;
using kernels::DeltaRuleForward;
using kernels::DeltaRuleShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "fused delta_rule";

struct Inputs {
  torch::Tensor q, k, v, beta, alpha, state;
  StateUpdate update;
};

DeltaRuleShape shape_of(const Inputs& in) {
  return {in.q.size(0),
          in.q.size(1),
          in.q.size(2),
          in.q.size(3),
          in.v.size(3),
          delta_rule_checkpoint_every(in.q.size(2)),
          in.update == StateUpdate::delta,
          in.alpha.defined() && in.alpha.dim() == 4};
}

void check_inputs(const Inputs& in) {
  TORCH_CHECK(in.q.dim() == 4 && in.k.sizes() == in.q.sizes() && in.v.dim() == 4 &&
                  in.v.sizes().slice(0, 3) == in.q.sizes().slice(0, 3) &&
                  in.beta.sizes() == in.q.sizes().slice(0, 3),
              kOp,
              ": q, k [batch, heads, length, dk], v [.., dv], beta [batch, heads, length]; got ",
              in.q.sizes(), ", ", in.k.sizes(), ", ", in.v.sizes(), ", ", in.beta.sizes());
  TORCH_CHECK(!in.alpha.defined() || in.alpha.sizes() == in.beta.sizes() ||
                  in.alpha.sizes() == in.k.sizes(),
              kOp, ": alpha must be shaped as beta or as k");
  for (const torch::Tensor& x : {in.k, in.v, in.beta, in.alpha}) {
    TORCH_CHECK(
        !x.defined() || (x.scalar_type() == in.q.scalar_type() && x.device() == in.q.device()), kOp,
        ": all inputs must share q's dtype and device");
  }
}

struct ForwardResult {
  torch::Tensor outputs;  // [batch, length, heads, dv]
  torch::Tensor state;
  torch::Tensor checkpoints;  // undefined without backward
};

template <typename T>
DeltaRuleForward<T> forward_params(const Inputs& in, const ForwardResult& out) {
  using Acc = kernels::AccumulatorOf<T>;
  return {sequence_view<const T>(in.q),
          sequence_view<const T>(in.k),
          sequence_view<const T>(in.v),
          sequence_view<const T>(in.beta),
          sequence_view<const T>(in.alpha),
          data_or_null<const Acc>(in.state),
          sequence_view<T>(out.outputs.transpose(1, 2)),
          data_or_null<Acc>(out.state),
          data_or_null<Acc>(out.checkpoints),
          shape_of(in)};
}

ForwardResult run_forward(const Inputs& in, bool keep_checkpoints) {
  const DeltaRuleShape shape = shape_of(in);
  const auto state_options = in.q.options().dtype(state_dtype(in.q.scalar_type()));
  ForwardResult out{
      torch::empty({shape.batch, shape.length, shape.heads, shape.value_dim}, in.v.options()),
      torch::empty({shape.batch, shape.heads, shape.value_dim, shape.key_dim}, state_options),
      {}};
  if (keep_checkpoints) {
    out.checkpoints = torch::empty(
        {shape.batch, shape.heads, shape.checkpoint_count(), shape.value_dim, shape.key_dim},
        state_options);
  }
  dispatch_element_type(in.q, kOp, [&]<typename T>(std::type_identity<T>) {
    const DeltaRuleForward<T> p = forward_params<T>(in, out);
    run_on_device<T>(
        kOp, in.q, shape.head_count(), shape.length * shape.matrix_size() * 4,
        [&](auto begin, auto end) { kernels::delta_rule_forward_cpu(p, begin, end); },
        [&](auto stream, const char** message) {
          return kernels::delta_rule_forward_cuda(p, stream, message);
        });
  });
  return out;
}

struct Gradients {
  torch::Tensor q, k, v, beta, alpha, state;
};

template <typename T>
DeltaRuleBackward<T> backward_params(const Inputs& in, const torch::Tensor& checkpoints,
                                     const torch::Tensor& grad_outputs,
                                     const torch::Tensor& grad_state, const Gradients& grads,
                                     const torch::Tensor& workspace) {
  using Acc = kernels::AccumulatorOf<T>;
  return {sequence_view<const T>(in.q),
          sequence_view<const T>(in.k),
          sequence_view<const T>(in.v),
          sequence_view<const T>(in.beta),
          sequence_view<const T>(in.alpha),
          data_or_null<const Acc>(checkpoints),
          sequence_view<const T>(grad_outputs),
          data_or_null<const Acc>(grad_state),
          sequence_view<T>(grads.q),
          sequence_view<T>(grads.k),
          sequence_view<T>(grads.v),
          sequence_view<T>(grads.beta),
          sequence_view<T>(grads.alpha),
          data_or_null<Acc>(grads.state),
          data_or_null<Acc>(workspace),
          shape_of(in)};
}

// grad_outputs: [batch, heads, length, dv] or undefined; grad_state contiguous or undefined.
Gradients run_backward(const Inputs& in, const torch::Tensor& checkpoints,
                       const torch::Tensor& grad_outputs, const torch::Tensor& grad_state) {
  const DeltaRuleShape shape = shape_of(in);
  const auto state_options = in.q.options().dtype(state_dtype(in.q.scalar_type()));
  Gradients grads{torch::empty_like(in.q),
                  torch::empty_like(in.k),
                  torch::empty_like(in.v),
                  torch::empty_like(in.beta),
                  in.alpha.defined() ? torch::empty_like(in.alpha) : torch::Tensor(),
                  in.state.defined() ? torch::empty_like(in.state) : torch::Tensor()};
  const torch::Tensor workspace =
      torch::empty({shape.head_count() * shape.workspace_per_head()}, state_options);
  dispatch_element_type(in.q, kOp, [&]<typename T>(std::type_identity<T>) {
    const DeltaRuleBackward<T> p =
        backward_params<T>(in, checkpoints, grad_outputs, grad_state, grads, workspace);
    run_on_device<T>(
        kOp, in.q, shape.head_count(), shape.length * shape.matrix_size() * 12,
        [&](auto begin, auto end) { kernels::delta_rule_backward_cpu(p, begin, end); },
        [&](auto stream, const char** message) {
          return kernels::delta_rule_backward_cuda(p, stream, message);
        });
  });
  return grads;
}

class DeltaRuleFunction : public torch::autograd::Function<DeltaRuleFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& beta,
                               const torch::Tensor& alpha, const torch::Tensor& state,
                               bool additive) {
    const StateUpdate update = additive ? StateUpdate::additive : StateUpdate::delta;
    const Inputs in{q, k, v, beta, undefined_if_empty(alpha), undefined_if_empty(state), update};
    ForwardResult out = run_forward(in, true);
    ctx->save_for_backward({q, k, v, beta, alpha, state, out.checkpoints});
    ctx->saved_data["additive"] = additive;
    return {out.outputs, out.state};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const Inputs in{
        saved[0],
        saved[1],
        saved[2],
        saved[3],
        undefined_if_empty(saved[4]),
        undefined_if_empty(saved[5]),
        ctx->saved_data["additive"].toBool() ? StateUpdate::additive : StateUpdate::delta};
    const torch::Tensor grad_out = grad_outputs[0].defined()
                                       ? width_contiguous(grad_outputs[0]).transpose(1, 2)
                                       : torch::Tensor();
    const torch::Tensor grad_state =
        grad_outputs[1].defined() ? grad_outputs[1].contiguous() : torch::Tensor();
    Gradients grads = run_backward(in, saved[6], grad_out, grad_state);
    return {grads.q, grads.k, grads.v, grads.beta, grads.alpha, grads.state, torch::Tensor()};
  }
};

bool needs_grad(const Inputs& in) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor& x : {in.q, in.k, in.v, in.beta, in.alpha, in.state}) {
    if (x.defined() && x.requires_grad()) return true;
  }
  return false;
}

}  // namespace

int64_t delta_rule_checkpoint_every(int64_t length) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(double(length)))));
}

DeltaRuleResult delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& beta, const torch::Tensor& alpha,
                           const torch::Tensor& state, StateUpdate update) {
  if (!kernels_take(q)) return delta_rule_reference(q, k, v, beta, alpha, state, update);
  const torch::Tensor decay = alpha.defined() && alpha.dim() == 4 ? width_contiguous(alpha) : alpha;
  Inputs in{
      width_contiguous(q), width_contiguous(k), width_contiguous(v), beta, decay, state, update};
  check_inputs(in);
  if (in.state.defined()) in.state = in.state.to(state_dtype(q.scalar_type())).contiguous();
  if (!needs_grad(in)) {
    ForwardResult out = run_forward(in, false);
    return {out.outputs.transpose(1, 2), out.state};
  }
  const variable_list out =
      DeltaRuleFunction::apply(in.q, in.k, in.v, in.beta, present_or_empty(in.alpha, in.q),
                               present_or_empty(in.state, in.q), update == StateUpdate::additive);
  return {out[0].transpose(1, 2), out[1]};
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
torch::Tensor delta_rule_step(const torch::Tensor& state, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& beta,
                              const torch::Tensor& alpha, StateUpdate update) {
  // α one number per head ([batch, heads]) or one per key column ([batch, heads, dk]).
  const torch::Tensor decayed = !alpha.defined()   ? state
                                : alpha.dim() == 3 ? state * alpha.unsqueeze(-2)
                                                   : state * alpha.unsqueeze(-1).unsqueeze(-1);
  if (update == StateUpdate::additive)
    return decayed + (beta.unsqueeze(-1) * v).unsqueeze(-1) * k.unsqueeze(-2);
  // α S (I − β k kᵀ) + β v kᵀ = α S + β (v − α S k) kᵀ: a rank-one correction, no dk x dk matrix.
  const torch::Tensor recalled = torch::matmul(decayed, k.unsqueeze(-1)).squeeze(-1);
  const torch::Tensor correction = beta.unsqueeze(-1) * (v - recalled);
  return decayed + correction.unsqueeze(-1) * k.unsqueeze(-2);
}

DeltaRuleResult delta_rule_reference(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& beta,
                                     const torch::Tensor& alpha, const torch::Tensor& state,
                                     StateUpdate update) {
  torch::Tensor s = state.defined()
                        ? state
                        : torch::zeros({v.size(0), v.size(1), v.size(3), k.size(3)}, v.options());
  std::vector<torch::Tensor> outputs;
  for (int64_t t = 0; t < v.size(2); ++t) {
    s = delta_rule_step(s, k.select(2, t), v.select(2, t), beta.select(2, t),
                        alpha.defined() ? alpha.select(2, t) : torch::Tensor(), update);
    outputs.push_back(torch::matmul(s, q.select(2, t).unsqueeze(-1)).squeeze(-1));
  }
  return {torch::stack(outputs, 2), s};
}

}  // namespace memscript::ops
