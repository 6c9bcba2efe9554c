#include "runtime/ops/mlp_block/mlp_block.h"

#include "kernels/common/block_sum.h"
#include "kernels/linear/linear.h"
#include "kernels/mlp_block/mlp_block.h"
#include "runtime/ops/common/launch.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"

namespace memscript::ops {

namespace {

using kernels::MlpBlockShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

MlpBlockShape shape_of(const torch::Tensor& x, const torch::Tensor& up_weight) {
  return {x.numel() / x.size(-1), x.size(-1), up_weight.size(0)};
}

template <typename T>
kernels::MlpBlockWeights<T> weights_of(const variable_list& w, double eps) {
  return {data<T>(w[0]), data<T>(w[1]), eps,          data<T>(w[2]),
          data<T>(w[3]), data<T>(w[4]), data<T>(w[5])};
}

class ResidualMlpFunction : public torch::autograd::Function<ResidualMlpFunction> {
 public:
  // The weights in MlpWeights' order: norm weight and bias, up weight and bias, down weight and
  // bias.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& m_in, const torch::Tensor& norm_weight,
                               const torch::Tensor& norm_bias, const torch::Tensor& up_weight,
                               const torch::Tensor& up_bias, const torch::Tensor& down_weight,
                               const torch::Tensor& down_bias, double eps) {
    const torch::Tensor x = x_in.contiguous(), m = m_in.contiguous();
    const variable_list weights = {norm_weight, norm_bias,   up_weight,
                                   up_bias,     down_weight, down_bias};
    const MlpBlockShape shape = shape_of(x, up_weight);
    const torch::Tensor h = torch::empty_like(x), y = torch::empty_like(x);
    const torch::Tensor mean = torch::empty({shape.rows}, x.options());
    const torch::Tensor rstd = torch::empty({shape.rows}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused residual mlp", [&] {
      const kernels::MlpBlockForward<scalar_t> args{weights_of<scalar_t>(weights, eps),
                                                    data<scalar_t>(x),
                                                    data<scalar_t>(m),
                                                    data<scalar_t>(h),
                                                    data<scalar_t>(y),
                                                    data<scalar_t>(mean),
                                                    data<scalar_t>(rstd)};
      parallel_over(shape.rows, 4 * shape.width * shape.hidden, [&](int64_t begin, int64_t end) {
        kernels::mlp_block_forward_cpu(args, shape, begin, end);
      });
    });
    variable_list saved = {h, mean, rstd};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["eps"] = eps;
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &mean = saved[1], &rstd = saved[2];
    const variable_list weights(saved.begin() + 3, saved.end());
    const torch::Tensor grad_y = grads[0].contiguous();
    const MlpBlockShape shape = shape_of(h, weights[2]);
    const int64_t blocks = kernels::mlp_block_blocks(shape);
    const int64_t count = kernels::mlp_block_parameter_count(shape);
    const torch::Tensor grad_h = torch::empty_like(h);
    const torch::Tensor partials = torch::empty({blocks, count}, h.options());
    const torch::Tensor sums = torch::empty({count}, h.options());
    AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "fused residual mlp backward", [&] {
      const kernels::MlpBlockBackward<scalar_t> args{
          weights_of<scalar_t>(weights, ctx->saved_data["eps"].toDouble()),
          data<scalar_t>(h),
          data<scalar_t>(mean),
          data<scalar_t>(rstd),
          data<scalar_t>(grad_y),
          data<scalar_t>(grad_h),
          data<scalar_t>(partials)};
      parallel_over(blocks, kernels::kMlpBlockRowsPerBlock * 12 * shape.width * shape.hidden,
                    [&](int64_t begin, int64_t end) {
                      kernels::mlp_block_backward_cpu(args, shape, begin, end);
                    });
      kernels::sum_blocks_cpu(data<scalar_t>(partials), blocks, count, data<scalar_t>(sums));
    });
    // The parameters' gradients, cut out of the one sum in kernels::mlp_block_parameter_count's
    // order.
    variable_list out = {grad_h, grad_h};
    int64_t offset = 0;
    for (const torch::Tensor& w : weights) {
      out.push_back(sums.narrow(0, offset, w.numel()).view(w.sizes()).clone());
      offset += w.numel();
    }
    out.push_back(torch::Tensor());  // eps
    return out;
  }
};

bool runs_on_kernels(const torch::Tensor& x, const torch::Tensor& m, const MlpWeights& w) {
  if (!on_cpu_kernels(x) || x.numel() == 0 || m.sizes() != x.sizes()) return false;
  for (const torch::Tensor& t :
       {m, w.norm_weight, w.norm_bias, w.up_weight, w.up_bias, w.down_weight, w.down_bias}) {
    if (!t.defined() || t.scalar_type() != x.scalar_type() || !t.is_cpu() || !t.is_contiguous())
      return false;
  }
  return w.up_weight.numel() <= kernels::kSmallLinearMaxWeights &&
         w.down_weight.numel() <= kernels::kSmallLinearMaxWeights;
}

}  // namespace

torch::Tensor residual_mlp_reference(const torch::Tensor& x, const torch::Tensor& m,
                                     const MlpWeights& w) {
  const torch::Tensor h = x + m;
  const torch::Tensor n = layer_norm(h, w.norm_weight, w.norm_bias, w.eps);
  return h +
         linear(linear(n, w.up_weight, w.up_bias, Activation::gelu), w.down_weight, w.down_bias);
}

torch::Tensor residual_mlp(const torch::Tensor& x, const torch::Tensor& m, const MlpWeights& w) {
  if (!runs_on_kernels(x, m, w)) return residual_mlp_reference(x, m, w);
  return ResidualMlpFunction::apply(x, m, w.norm_weight, w.norm_bias, w.up_weight, w.up_bias,
                                    w.down_weight, w.down_bias, w.eps)[0];
}

}  // namespace memscript::ops
