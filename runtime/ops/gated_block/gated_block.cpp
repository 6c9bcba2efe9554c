#include "runtime/ops/gated_block/gated_block.h"

#include "kernels/common/block_sum.h"
#include "kernels/gated_block/gated_block.h"
#include "runtime/ops/common/kernel_args.h"
#include "runtime/ops/gated_scan/gated_scan.h"
#include "runtime/ops/linear/linear.h"

namespace memscript::ops {

namespace {

using kernels::GatedBlockShape;
using kernels::GatedCellKind;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "fused gated block";

// The autograd Function's tensor inputs after x, in this order (optional ones empty).
enum Weight { norm_weight, norm_bias, in_weight, in_bias, forget_bias, out_weight, out_bias };
constexpr int kWeights = 7;

GatedBlockShape shape_of(const torch::Tensor& x, const torch::Tensor& out_weight) {
  return {x.size(0), x.size(1), x.size(2), out_weight.size(1)};
}

template <typename T>
kernels::GatedBlockWeights<T> weights_of(const variable_list& w, GatedCellKind kind, bool negative,
                                         double eps) {
  const auto optional = [&](Weight i) { return data<T>(undefined_if_empty(w[i])); };
  return {kind,
          negative,
          data<T>(w[norm_weight]),
          data<T>(w[norm_bias]),
          eps,
          data<T>(w[in_weight]),
          optional(in_bias),
          optional(forget_bias),
          data<T>(w[out_weight]),
          optional(out_bias)};
}

// Multiply-adds per batch row and step, roughly: both projections, the gates and the layer
// norm (what sizes the thread pool's chunks).
int64_t work_per_step(GatedCellKind kind, const GatedBlockShape& s) {
  return (kernels::gated_slots(kind) * s.hidden + s.width) * (s.width + 8) + 20 * s.hidden;
}

void run_groups(GatedCellKind kind, const GatedBlockShape& s, int64_t factor,
                const std::function<void(int64_t, int64_t)>& body) {
  const int64_t per_group = kernels::kTileRows * s.length * factor * work_per_step(kind, s);
  parallel_over(kernels::gated_block_groups(s), per_group, body);
}

class GatedBlockFunction : public torch::autograd::Function<GatedBlockFunction> {
 public:
  // `weights` in the order of Weight, optional ones as empty tensors; so is initial.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w_norm_weight, const torch::Tensor& w_norm_bias,
                               const torch::Tensor& w_in_weight, const torch::Tensor& w_in_bias,
                               const torch::Tensor& w_forget_bias,
                               const torch::Tensor& w_out_weight, const torch::Tensor& w_out_bias,
                               const torch::Tensor& initial_or_empty, double eps, bool qlstm,
                               bool negative) {
    const variable_list weights = {w_norm_weight, w_norm_bias,  w_in_weight, w_in_bias,
                                   w_forget_bias, w_out_weight, w_out_bias};
    const GatedCellKind kind = qlstm ? GatedCellKind::qlstm : GatedCellKind::mingru;
    const GatedBlockShape shape = shape_of(x, w_out_weight);
    const torch::Tensor initial = undefined_if_empty(initial_or_empty);
    const torch::Tensor y = torch::empty_like(x);
    const torch::Tensor states =
        torch::empty({shape.batch, shape.length, shape.hidden}, x.options());
    const torch::Tensor last = torch::empty({shape.batch, shape.hidden}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
      const kernels::GatedBlockForward<scalar_t> args{
          weights_of<scalar_t>(weights, kind, negative, eps),
          data<scalar_t>(x),
          data<scalar_t>(initial),
          data<scalar_t>(y),
          data<scalar_t>(states),
          data<scalar_t>(last)};
      run_groups(kind, shape, 1, [&](int64_t begin, int64_t end) {
        kernels::gated_block_forward_cpu(args, shape, begin, end);
      });
    });
    variable_list saved = {x, initial_or_empty, states};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["qlstm"] = qlstm;
    ctx->saved_data["negative"] = negative;
    return {y, last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &states = saved[2];
    const torch::Tensor initial = undefined_if_empty(saved[1]);
    const variable_list weights(saved.begin() + 3, saved.end());
    const GatedCellKind kind =
        ctx->saved_data["qlstm"].toBool() ? GatedCellKind::qlstm : GatedCellKind::mingru;
    const GatedBlockShape shape = shape_of(x, weights[out_weight]);
    const torch::Tensor grad_y = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(x);
    const torch::Tensor grad_last = grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
    const int64_t groups = kernels::gated_block_groups(shape);
    const int64_t count = kernels::gated_block_parameter_count(kind, shape);
    const torch::Tensor grad_x = torch::empty_like(x);
    const torch::Tensor grad_initial = initial.defined() ? torch::empty_like(initial) : initial;
    const torch::Tensor partials = torch::empty({groups, count}, x.options());
    const torch::Tensor sums = torch::empty({count}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
      const kernels::GatedBlockBackward<scalar_t> args{
          weights_of<scalar_t>(weights, kind, ctx->saved_data["negative"].toBool(),
                               ctx->saved_data["eps"].toDouble()),
          data<scalar_t>(x),
          data<scalar_t>(initial),
          data<scalar_t>(states),
          data<scalar_t>(grad_y),
          data<scalar_t>(grad_last),
          data<scalar_t>(grad_x),
          data<scalar_t>(grad_initial),
          data<scalar_t>(partials)};
      run_groups(kind, shape, 3, [&](int64_t begin, int64_t end) {
        kernels::gated_block_backward_cpu(args, shape, begin, end);
      });
      kernels::sum_blocks_cpu(data<scalar_t>(partials), groups, count, data<scalar_t>(sums));
    });
    return assemble_gradients(grad_x, sums, weights, grad_initial, shape);
  }

 private:
  // The inputs' gradients in forward's order, the parameters' cut out of the one sum in
  // kernels::gated_block_parameter_count's order.
  static variable_list assemble_gradients(const torch::Tensor& grad_x, const torch::Tensor& sums,
                                          const variable_list& weights,
                                          const torch::Tensor& grad_initial,
                                          const GatedBlockShape& shape) {
    int64_t offset = 0;
    const auto take = [&](torch::IntArrayRef sizes) {
      const int64_t numel = c10::multiply_integers(sizes);
      const torch::Tensor g = sums.narrow(0, offset, numel).view(sizes).clone();
      offset += numel;
      return g;
    };
    variable_list out(1 + kWeights);
    out[0] = grad_x;
    for (const Weight w : {norm_weight, norm_bias, in_weight})
      out[1 + w] = take(weights[w].sizes());
    const torch::Tensor grad_pre_sum = take({weights[in_weight].size(0)});
    if (weights[in_bias].numel() > 0) out[1 + in_bias] = grad_pre_sum;
    if (weights[forget_bias].numel() > 0)
      out[1 + forget_bias] = grad_pre_sum.narrow(0, 0, shape.hidden).clone();
    out[1 + out_weight] = take(weights[out_weight].sizes());
    if (weights[out_bias].numel() > 0) out[1 + out_bias] = take(weights[out_bias].sizes());
    out.push_back(grad_initial);
    out.resize(out.size() + 3);  // eps, qlstm, negative
    return out;
  }
};

bool runs_on_kernels(const torch::Tensor& x, const PreNorm& norm, const GatedProjections& p,
                     const torch::Tensor& initial) {
  if (!on_cpu_kernels(x) || x.dim() != 3 || x.numel() == 0 || !p.out_weight.defined()) {
    return false;
  }
  const GatedBlockShape shape = shape_of(x, p.out_weight);
  if (!kernels::gated_block_fits(shape)) return false;
  for (const torch::Tensor& t : {norm.weight, norm.bias, p.in_weight, p.in_bias, p.forget_bias,
                                 p.out_weight, p.out_bias, initial}) {
    if (t.defined() && (t.scalar_type() != x.scalar_type() || !t.is_cpu())) return false;
  }
  return norm.weight.defined() && norm.bias.defined() && p.in_weight.defined();
}

// The block from its parts, where the kernel does not take the tensors.
GatedBlockResult composed(GatedCellKind kind, const torch::Tensor& x, const PreNorm& norm,
                          const GatedProjections& p, const torch::Tensor& initial, bool negative) {
  const torch::Tensor pre = linear(pre_norm(x, norm), p.in_weight, p.in_bias);
  const GatedScanResult cell = kind == GatedCellKind::qlstm
                                   ? qlstm_cell(pre, p.forget_bias, initial, negative)
                                   : mingru_cell(pre, initial, negative);
  return {linear(cell.outputs, p.out_weight, p.out_bias), cell.last};
}

GatedBlockResult apply(GatedCellKind kind, const torch::Tensor& x, const PreNorm& norm,
                       const GatedProjections& p, const torch::Tensor& initial, bool negative) {
  if (!runs_on_kernels(x, norm, p, initial)) return composed(kind, x, norm, p, initial, negative);
  const int64_t hidden = p.out_weight.size(1);
  TORCH_CHECK(p.in_weight.dim() == 2 &&
                  p.in_weight.size(0) == kernels::gated_slots(kind) * hidden &&
                  p.in_weight.size(1) == x.size(2),
              kOp, ": the input projection must be [", kernels::gated_slots(kind) * hidden, ", ",
              x.size(2), "], got ", p.in_weight.sizes());
  TORCH_CHECK(!initial.defined() || initial.sizes() == torch::IntArrayRef({x.size(0), hidden}), kOp,
              ": the initial state must be [", x.size(0), ", ", hidden, "], got ", initial.sizes());
  const auto contiguous = [&](const torch::Tensor& t) {
    return present_or_empty(t.defined() ? t.contiguous() : t, x);
  };
  const variable_list out = GatedBlockFunction::apply(
      x.contiguous(), contiguous(norm.weight), contiguous(norm.bias), contiguous(p.in_weight),
      contiguous(p.in_bias), contiguous(p.forget_bias), contiguous(p.out_weight),
      contiguous(p.out_bias), contiguous(initial), norm.eps, kind == GatedCellKind::qlstm,
      negative);
  return GatedBlockResult{out[0], out[1]};
}

}  // namespace

GatedBlockResult qlstm_block(const torch::Tensor& x, const PreNorm& norm,
                             const GatedProjections& projections, const torch::Tensor& c0,
                             bool negative_eigenvalues) {
  return apply(GatedCellKind::qlstm, x, norm, projections, c0, negative_eigenvalues);
}

GatedBlockResult mingru_block(const torch::Tensor& x, const PreNorm& norm,
                              const GatedProjections& projections, const torch::Tensor& h0,
                              bool negative_eigenvalues) {
  return apply(GatedCellKind::mingru, x, norm, projections, h0, negative_eigenvalues);
}

}  // namespace memscript::ops
