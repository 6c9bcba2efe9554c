#include "runtime/ops/layer_norm/layer_norm.h"

#include "kernels/common/block_sum.h"
#include "kernels/layer_norm/layer_norm.h"
#include "runtime/ops/common/launch.h"

namespace memscript::ops {

namespace {

using kernels::LayerNormShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

LayerNormShape shape_of(const torch::Tensor& x) { return {x.numel() / x.size(-1), x.size(-1)}; }

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
    const torch::Tensor x = x_in.contiguous();
    const LayerNormShape shape = shape_of(x);
    const torch::Tensor y = torch::empty_like(x);
    const torch::Tensor mean = torch::empty({shape.rows}, x.options());
    const torch::Tensor rstd = torch::empty({shape.rows}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused layer_norm", [&] {
      const kernels::LayerNormForward<scalar_t> args{
          data<scalar_t>(x), data<scalar_t>(weight), data<scalar_t>(bias), eps,
          data<scalar_t>(y), data<scalar_t>(mean),   data<scalar_t>(rstd)};
      parallel_over(shape.rows, 4 * shape.width, [&](int64_t begin, int64_t end) {
        kernels::layer_norm_forward_cpu(args, shape, begin, end);
      });
    });
    ctx->save_for_backward({x, weight, mean, rstd});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3];
    const torch::Tensor grad_y = grads[0].contiguous();
    const LayerNormShape shape = shape_of(x);
    const int64_t blocks = kernels::layer_norm_blocks(shape);
    const torch::Tensor grad_x = torch::empty_like(x);
    // The weight's partial sums, then the bias's.
    const torch::Tensor partials = torch::empty({2 * blocks * shape.width}, x.options());
    const torch::Tensor grad_weight = torch::empty_like(weight);
    const torch::Tensor grad_bias = torch::empty_like(weight);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused layer_norm backward", [&] {
      scalar_t* weight_partials = data<scalar_t>(partials);
      const kernels::LayerNormBackward<scalar_t> args{
          data<scalar_t>(x),      data<scalar_t>(weight),
          data<scalar_t>(mean),   data<scalar_t>(rstd),
          data<scalar_t>(grad_y), data<scalar_t>(grad_x),
          weight_partials,        weight_partials + blocks * shape.width};
      parallel_over(blocks, kernels::kLayerNormRowsPerBlock * 8 * shape.width,
                    [&](int64_t begin, int64_t end) {
                      kernels::layer_norm_backward_cpu(args, shape, begin, end);
                    });
      kernels::sum_blocks_cpu(args.weight_partials, blocks, shape.width,
                              data<scalar_t>(grad_weight));
      kernels::sum_blocks_cpu(args.bias_partials, blocks, shape.width, data<scalar_t>(grad_bias));
    });
    return {grad_x, grad_weight, grad_bias, torch::Tensor()};
  }
};

bool runs_on_kernels(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  const auto dtype = x.scalar_type();
  return on_cpu_kernels(x) && x.numel() > 0 && weight.scalar_type() == dtype &&
         bias.scalar_type() == dtype && weight.is_contiguous() && bias.is_contiguous() &&
         weight.numel() == x.size(-1) && bias.numel() == x.size(-1);
}

}  // namespace

torch::Tensor layer_norm_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                   const torch::Tensor& bias, double eps) {
  const torch::Tensor centered = x - x.mean(-1, true);
  const torch::Tensor variance = centered.square().mean(-1, true);
  return centered * torch::rsqrt(variance + eps) * weight + bias;
}

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps) {
  if (!runs_on_kernels(x, weight, bias)) return layer_norm_reference(x, weight, bias, eps);
  return LayerNormFunction::apply(x, weight, bias, eps)[0];
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const torch::Tensor normalised = x * torch::rsqrt(x.pow(2).mean(-1, true) + eps);
  return weight.defined() ? normalised * weight : normalised;
}

torch::Tensor pre_norm(const torch::Tensor& x, const PreNorm& norm) {
  if (!norm.bias.defined()) return rms_norm(x, norm.weight, norm.eps);
  return layer_norm(x, norm.weight, norm.bias, norm.eps);
}

}  // namespace memscript::ops
