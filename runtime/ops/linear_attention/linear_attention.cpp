#include "runtime/ops/linear_attention/linear_attention.h"

#include "kernels/linear_attention/linear_attention.h"
#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

namespace {

using kernels::LinearAttentionBackward;
using kernels::LinearAttentionForward;
using kernels::LinearAttentionShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "fused linear_attention";

struct Inputs {
  torch::Tensor phi_q, phi_k, v, sum, normaliser;
  double eps;
};

LinearAttentionShape shape_of(const Inputs& in) {
  return {in.phi_q.size(0), in.phi_q.size(1), in.phi_q.size(2), in.phi_q.size(3), in.v.size(3)};
}

void check_inputs(const Inputs& in) {
  TORCH_CHECK(in.phi_q.dim() == 4 && in.phi_k.sizes() == in.phi_q.sizes() && in.v.dim() == 4 &&
                  in.v.sizes().slice(0, 3) == in.phi_q.sizes().slice(0, 3),
              kOp, ": phi_q, phi_k [batch, heads, length, dk], v [.., dv]; got ", in.phi_q.sizes(),
              ", ", in.phi_k.sizes(), ", ", in.v.sizes());
  TORCH_CHECK(in.sum.defined() == in.normaliser.defined(), kOp,
              ": give both sum and normaliser, or neither");
  for (const torch::Tensor& x : {in.phi_k, in.v}) {
    TORCH_CHECK(x.scalar_type() == in.phi_q.scalar_type() && x.device() == in.phi_q.device(), kOp,
                ": all inputs must share phi_q's dtype and device");
  }
}

struct ForwardResult {
  torch::Tensor outputs;  // [batch, length, heads, dv]
  torch::Tensor sum, normaliser;
  torch::Tensor denominators;  // undefined without backward
};

template <typename T>
LinearAttentionForward<T> forward_params(const Inputs& in, const ForwardResult& out) {
  using Acc = kernels::AccumulatorOf<T>;
  return {sequence_view<const T>(in.phi_q),
          sequence_view<const T>(in.phi_k),
          sequence_view<const T>(in.v),
          data_or_null<const Acc>(in.sum),
          data_or_null<const Acc>(in.normaliser),
          sequence_view<T>(out.outputs.transpose(1, 2)),
          data_or_null<Acc>(out.sum),
          data_or_null<Acc>(out.normaliser),
          data_or_null<Acc>(out.denominators),
          static_cast<Acc>(in.eps),
          shape_of(in)};
}

ForwardResult run_forward(const Inputs& in, bool keep_denominators) {
  const LinearAttentionShape shape = shape_of(in);
  const auto state_options = in.phi_q.options().dtype(state_dtype(in.phi_q.scalar_type()));
  ForwardResult out{
      torch::empty({shape.batch, shape.length, shape.heads, shape.value_dim}, in.v.options()),
      torch::empty({shape.batch, shape.heads, shape.key_dim, shape.value_dim}, state_options),
      torch::empty({shape.batch, shape.heads, shape.key_dim}, state_options),
      {}};
  if (keep_denominators)
    out.denominators = torch::empty({shape.batch, shape.heads, shape.length}, state_options);
  dispatch_element_type(in.phi_q, kOp, [&]<typename T>(std::type_identity<T>) {
    const LinearAttentionForward<T> p = forward_params<T>(in, out);
    run_on_device<T>(
        kOp, in.phi_q, shape.head_count(), shape.length * shape.matrix_size() * 3,
        [&](auto begin, auto end) { kernels::linear_attention_forward_cpu(p, begin, end); },
        [&](auto stream, const char** message) {
          return kernels::linear_attention_forward_cuda(p, stream, message);
        });
  });
  return out;
}

struct Saved {
  torch::Tensor outputs, denominators;  // outputs [batch, heads, length, dv]
  torch::Tensor grad_outputs, grad_sum, grad_normaliser;
};

struct Gradients {
  torch::Tensor phi_q, phi_k, v, sum, normaliser;
};

template <typename T>
LinearAttentionBackward<T> backward_params(const Inputs& in, const Saved& saved,
                                           const Gradients& grads, const torch::Tensor& workspace) {
  using Acc = kernels::AccumulatorOf<T>;
  return {sequence_view<const T>(in.phi_q),
          sequence_view<const T>(in.phi_k),
          sequence_view<const T>(in.v),
          sequence_view<const T>(saved.outputs),
          data_or_null<const Acc>(in.sum),
          data_or_null<const Acc>(in.normaliser),
          data_or_null<const Acc>(saved.denominators),
          sequence_view<const T>(saved.grad_outputs),
          data_or_null<const Acc>(saved.grad_sum),
          data_or_null<const Acc>(saved.grad_normaliser),
          sequence_view<T>(grads.phi_q),
          sequence_view<T>(grads.phi_k),
          sequence_view<T>(grads.v),
          data_or_null<Acc>(grads.sum),
          data_or_null<Acc>(grads.normaliser),
          data_or_null<Acc>(workspace),
          shape_of(in)};
}

Gradients run_backward(const Inputs& in, const Saved& saved) {
  const LinearAttentionShape shape = shape_of(in);
  const auto state_options = in.phi_q.options().dtype(state_dtype(in.phi_q.scalar_type()));
  Gradients grads{torch::empty_like(in.phi_q), torch::empty_like(in.phi_k), torch::empty_like(in.v),
                  in.sum.defined() ? torch::empty_like(in.sum) : torch::Tensor(),
                  in.normaliser.defined() ? torch::empty_like(in.normaliser) : torch::Tensor()};
  const torch::Tensor workspace =
      torch::empty({shape.head_count() * shape.workspace_per_head()}, state_options);
  dispatch_element_type(in.phi_q, kOp, [&]<typename T>(std::type_identity<T>) {
    const LinearAttentionBackward<T> p = backward_params<T>(in, saved, grads, workspace);
    run_on_device<T>(
        kOp, in.phi_q, shape.head_count(), shape.length * shape.matrix_size() * 8,
        [&](auto begin, auto end) { kernels::linear_attention_backward_cpu(p, begin, end); },
        [&](auto stream, const char** message) {
          return kernels::linear_attention_backward_cuda(p, stream, message);
        });
  });
  return grads;
}

torch::Tensor contiguous_or_undefined(const torch::Tensor& x) {
  return x.defined() ? x.contiguous() : x;
}

class LinearAttentionFunction : public torch::autograd::Function<LinearAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& phi_q,
                               const torch::Tensor& phi_k, const torch::Tensor& v,
                               const torch::Tensor& sum, const torch::Tensor& normaliser,
                               double eps) {
    const Inputs in{phi_q, phi_k, v, undefined_if_empty(sum), undefined_if_empty(normaliser), eps};
    ForwardResult out = run_forward(in, true);
    ctx->save_for_backward({phi_q, phi_k, v, sum, normaliser, out.outputs, out.denominators});
    ctx->saved_data["eps"] = eps;
    return {out.outputs, out.sum, out.normaliser};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const Inputs in{saved[0],
                    saved[1],
                    saved[2],
                    undefined_if_empty(saved[3]),
                    undefined_if_empty(saved[4]),
                    ctx->saved_data["eps"].toDouble()};
    const torch::Tensor grad_out = grad_outputs[0].defined()
                                       ? width_contiguous(grad_outputs[0]).transpose(1, 2)
                                       : torch::Tensor();
    const Saved for_backward{saved[5].transpose(1, 2), saved[6], grad_out,
                             contiguous_or_undefined(grad_outputs[1]),
                             contiguous_or_undefined(grad_outputs[2])};
    Gradients grads = run_backward(in, for_backward);
    return {grads.phi_q, grads.phi_k, grads.v, grads.sum, grads.normaliser, torch::Tensor()};
  }
};

bool needs_grad(const Inputs& in) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor& x : {in.phi_q, in.phi_k, in.v, in.sum, in.normaliser}) {
    if (x.defined() && x.requires_grad()) return true;
  }
  return false;
}

}  // namespace

LinearAttentionResult linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       const torch::Tensor& v, const torch::Tensor& sum,
                                       const torch::Tensor& normaliser, double eps) {
  if (!kernels_take(phi_q))
    return linear_attention_reference(phi_q, phi_k, v, sum, normaliser, eps);
  const torch::ScalarType states = state_dtype(phi_q.scalar_type());
  Inputs in{width_contiguous(phi_q),
            width_contiguous(phi_k),
            width_contiguous(v),
            sum.defined() ? sum.to(states).contiguous() : sum,
            normaliser.defined() ? normaliser.to(states).contiguous() : normaliser,
            eps};
  check_inputs(in);
  if (!needs_grad(in)) {
    ForwardResult out = run_forward(in, false);
    return {out.outputs.transpose(1, 2), out.sum, out.normaliser};
  }
  const variable_list out =
      LinearAttentionFunction::apply(in.phi_q, in.phi_k, in.v, present_or_empty(in.sum, in.phi_q),
                                     present_or_empty(in.normaliser, in.phi_q), in.eps);
  return {out[0].transpose(1, 2), out[1], out[2]};
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
namespace {

// Tokens per block: big enough that the block's matrix products beat a per-token loop, small
// enough that its [block x block] scores stay cheap.
constexpr int64_t kBlock = 64;

// One block: what the carried state contributes, plus the causal sum within the block.
LinearAttentionResult attend_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                   const torch::Tensor& v, const torch::Tensor& sum,
                                   const torch::Tensor& normaliser, double eps) {
  const torch::Tensor scores = torch::matmul(phi_q, phi_k.transpose(-1, -2)).tril();
  const torch::Tensor numerator = torch::matmul(phi_q, sum) + torch::matmul(scores, v);
  const torch::Tensor denominator =
      torch::matmul(phi_q, normaliser.unsqueeze(-1)) + scores.sum(-1, true) + eps;
  return {numerator / denominator, sum + torch::matmul(phi_k.transpose(-1, -2), v),
          normaliser + phi_k.sum(2)};
}

}  // namespace

LinearAttentionResult linear_attention_reference(const torch::Tensor& phi_q,
                                                 const torch::Tensor& phi_k, const torch::Tensor& v,
                                                 const torch::Tensor& sum,
                                                 const torch::Tensor& normaliser, double eps) {
  const int64_t batch = v.size(0), heads = v.size(1), dk = phi_k.size(3), dv = v.size(3);
  LinearAttentionResult carried{
      {},
      sum.defined() ? sum : torch::zeros({batch, heads, dk, dv}, v.options()),
      normaliser.defined() ? normaliser : torch::zeros({batch, heads, dk}, v.options())};
  std::vector<torch::Tensor> outputs;
  for (int64_t start = 0; start < v.size(2); start += kBlock) {
    const int64_t length = std::min(kBlock, v.size(2) - start);
    carried = attend_block(phi_q.narrow(2, start, length), phi_k.narrow(2, start, length),
                           v.narrow(2, start, length), carried.sum, carried.normaliser, eps);
    outputs.push_back(carried.outputs);
  }
  return {torch::cat(outputs, 2), carried.sum, carried.normaliser};
}

}  // namespace memscript::ops
