#include "runtime/ops/l2_normalize/l2_normalize.h"

#include "kernels/l2_normalize/l2_normalize.h"
#include "runtime/ops/common/launch.h"

namespace memscript::ops {

namespace {

using kernels::L2NormalizeShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kEps = 1e-12;  // F.normalize's default

L2NormalizeShape shape_of(const torch::Tensor& x) { return {x.numel() / x.size(-1), x.size(-1)}; }

class L2NormalizeFunction : public torch::autograd::Function<L2NormalizeFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in) {
    const torch::Tensor x = x_in.contiguous();
    const L2NormalizeShape shape = shape_of(x);
    const torch::Tensor y = torch::empty_like(x);
    const torch::Tensor norms = torch::empty({shape.rows}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused l2_normalize", [&] {
      parallel_over(shape.rows, 3 * shape.width, [&](int64_t begin, int64_t end) {
        kernels::l2_normalize_forward_cpu(data<scalar_t>(x), data<scalar_t>(y),
                                          data<scalar_t>(norms), kEps, shape, begin, end);
      });
    });
    ctx->save_for_backward({y, norms});
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &y = saved[0], &norms = saved[1];
    const torch::Tensor grad_y = grads[0].contiguous();
    const L2NormalizeShape shape = shape_of(y);
    const torch::Tensor grad_x = torch::empty_like(y);
    AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "fused l2_normalize backward", [&] {
      parallel_over(shape.rows, 4 * shape.width, [&](int64_t begin, int64_t end) {
        kernels::l2_normalize_backward_cpu(data<scalar_t>(y), data<scalar_t>(norms),
                                           data<scalar_t>(grad_y), data<scalar_t>(grad_x), kEps,
                                           shape, begin, end);
      });
    });
    return {grad_x};
  }
};

}  // namespace

torch::Tensor l2_normalize_reference(const torch::Tensor& x) {
  return torch::nn::functional::normalize(x, torch::nn::functional::NormalizeFuncOptions().dim(-1));
}

torch::Tensor l2_normalize(const torch::Tensor& x) {
  if (!on_cpu_kernels(x) || x.numel() == 0) return l2_normalize_reference(x);
  return L2NormalizeFunction::apply(x)[0];
}

}  // namespace memscript::ops
