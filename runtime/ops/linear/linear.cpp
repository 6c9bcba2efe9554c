#include "runtime/ops/linear/linear.h"

#include "kernels/common/activation.h"
#include "kernels/common/block_sum.h"
#include "kernels/linear/linear.h"
#include "runtime/ops/common/kernel_args.h"

namespace memscript::ops {

namespace {

using kernels::SmallLinearShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x as [rows, in]: a view when x is contiguous.
torch::Tensor as_matrix(const torch::Tensor& x) { return x.reshape({-1, x.size(-1)}); }

// The shape of y: x's leading axes and the weight's rows.
std::vector<int64_t> output_shape(const torch::Tensor& x, const torch::Tensor& weight) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = weight.size(0);
  return shape;
}

// Weights this small run on kernels/linear/linear.h (CPU, float32/float64), where a
// BLAS call would cost more than the arithmetic; everything else on libtorch's matrix products.
bool runs_on_small_kernel(const torch::Tensor& x, const torch::Tensor& weight) {
  return on_cpu_kernels(x) && weight.scalar_type() == x.scalar_type() &&
         weight.numel() <= kernels::kSmallLinearMaxWeights;
}

SmallLinearShape shape_of(const torch::Tensor& rows, const torch::Tensor& weight) {
  return {rows.size(0), weight.size(1), weight.size(0)};
}

// The output and, when the activation's backward reads it, the pre-activation.
struct LinearForward {
  torch::Tensor y, pre;
};

LinearForward small_forward(const torch::Tensor& rows, const torch::Tensor& weight,
                            const torch::Tensor& bias, Activation activation) {
  const SmallLinearShape shape = shape_of(rows, weight);
  LinearForward out{torch::empty({shape.rows, shape.out}, rows.options()), torch::Tensor()};
  if (kernels::keeps_pre_activation(activation)) out.pre = torch::empty_like(out.y);
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "fused linear", [&] {
    parallel_over(shape.rows, shape.in * shape.out, [&](int64_t begin, int64_t end) {
      kernels::small_linear_forward_cpu(data<scalar_t>(rows), data<scalar_t>(weight),
                                        data<scalar_t>(bias), activation, data<scalar_t>(out.pre),
                                        data<scalar_t>(out.y), shape, begin, end);
    });
  });
  return out;
}

// About the work of one activation (an exp and a division) per element, for parallel_over.
constexpr int64_t kActivationSteps = 4;

torch::Tensor activation_forward(const torch::Tensor& pre, Activation activation) {
  if (activation == Activation::none) return pre;
  if (!on_cpu_kernels(pre)) return activation_reference(pre, activation);
  const torch::Tensor x = pre.contiguous();
  const torch::Tensor y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused activation", [&] {
    parallel_over(x.numel(), kActivationSteps, [&](int64_t begin, int64_t end) {
      kernels::activation_forward_cpu(activation, data<scalar_t>(x) + begin,
                                      data<scalar_t>(y) + begin, end - begin);
    });
  });
  return y;
}

torch::Tensor small_grad_input(const torch::Tensor& grad, const torch::Tensor& weight) {
  const SmallLinearShape shape = shape_of(grad, weight);
  const torch::Tensor grad_x = torch::empty({shape.rows, shape.in}, grad.options());
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "fused linear backward", [&] {
    parallel_over(shape.rows, shape.in * shape.out, [&](int64_t begin, int64_t end) {
      kernels::small_linear_grad_input_cpu(data<scalar_t>(grad), data<scalar_t>(weight),
                                           data<scalar_t>(grad_x), shape, begin, end);
    });
  });
  return grad_x;
}

// The weight's gradient, and the bias's when `with_bias`, summed over fixed blocks of rows.
std::pair<torch::Tensor, torch::Tensor> small_grad_params(const torch::Tensor& grad,
                                                          const torch::Tensor& rows,
                                                          const torch::Tensor& weight,
                                                          bool with_bias) {
  const SmallLinearShape shape = shape_of(rows, weight);
  const int64_t blocks = kernels::small_linear_blocks(shape);
  const torch::Tensor weight_partials = torch::empty({blocks, shape.out, shape.in}, rows.options());
  const torch::Tensor bias_partials =
      with_bias ? torch::empty({blocks, shape.out}, rows.options()) : torch::Tensor();
  const torch::Tensor grad_weight = torch::empty_like(weight);
  const torch::Tensor grad_bias =
      with_bias ? torch::empty({shape.out}, rows.options()) : torch::Tensor();
  AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "fused linear backward", [&] {
    parallel_over(blocks, kernels::kSmallLinearRowsPerBlock * shape.in * shape.out,
                  [&](int64_t begin, int64_t end) {
                    kernels::small_linear_grad_params_cpu(
                        data<scalar_t>(grad), data<scalar_t>(rows), data<scalar_t>(weight_partials),
                        data<scalar_t>(bias_partials), shape, begin, end);
                  });
    kernels::sum_blocks_cpu(data<scalar_t>(weight_partials), blocks, shape.out * shape.in,
                            data<scalar_t>(grad_weight));
    if (with_bias) {
      kernels::sum_blocks_cpu(data<scalar_t>(bias_partials), blocks, shape.out,
                              data<scalar_t>(grad_bias));
    }
  });
  return {grad_weight, grad_bias};
}

// grad with respect to the pre-activation, from `kept`: the pre-activation or the output
// (kernels::keeps_pre_activation).
torch::Tensor activation_backward(const torch::Tensor& grad, const torch::Tensor& kept,
                                  Activation activation) {
  if (activation == Activation::none) return grad;
  if (!on_cpu_kernels(grad)) {
    switch (activation) {
      case Activation::gelu:
        return torch::gelu_backward(grad, kept);
      case Activation::sigmoid:
        return torch::sigmoid_backward(grad, kept);
      case Activation::elu_plus_one:
        return torch::elu_backward(grad, 1, 1, 1, false, kept);
      case Activation::relu:
        return torch::threshold_backward(grad, kept, 0);
      case Activation::softplus:
        return torch::softplus_backward(grad, kept, 1, 20);
      case Activation::silu:
        return torch::silu_backward(grad, kept);
      case Activation::none:
        break;
    }
    return grad;
  }
  const torch::Tensor g = grad.contiguous();
  const torch::Tensor k = kept.contiguous();
  const torch::Tensor grad_pre = torch::empty_like(g);
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "fused activation backward", [&] {
    parallel_over(g.numel(), kActivationSteps, [&](int64_t begin, int64_t end) {
      kernels::activation_backward_cpu(activation, data<scalar_t>(g) + begin,
                                       data<scalar_t>(k) + begin, data<scalar_t>(grad_pre) + begin,
                                       end - begin);
    });
  });
  return grad_pre;
}

// What the backward of the activation reads (kernels::keeps_pre_activation).
torch::Tensor kept_for_backward(const LinearForward& out, Activation activation) {
  if (activation == Activation::none) return torch::Tensor();
  return kernels::keeps_pre_activation(activation) ? out.pre : out.y;
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight_in, const torch::Tensor& bias_or_empty,
                               int64_t activation_index) {
    const auto activation = static_cast<Activation>(activation_index);
    torch::Tensor bias = undefined_if_empty(bias_or_empty);
    if (bias.defined()) bias = bias.contiguous();
    const bool small = runs_on_small_kernel(x, weight_in);
    const torch::Tensor weight = small ? weight_in.contiguous() : weight_in;
    const torch::Tensor rows = small ? as_matrix(x).contiguous() : as_matrix(x);
    LinearForward out;
    if (small) {
      out = small_forward(rows, weight, bias, activation);
    } else {
      out.pre = bias.defined() ? torch::addmm(bias, rows, weight.t()) : torch::mm(rows, weight.t());
      out.y = activation_forward(out.pre, activation);
    }
    ctx->save_for_backward({rows, weight, kept_for_backward(out, activation)});
    ctx->saved_data["shape"] = x.sizes();
    ctx->saved_data["bias"] = bias.defined();
    ctx->saved_data["small"] = small;
    ctx->saved_data["activation"] = activation_index;
    return {out.y};  // [rows, out]; linear() views it in x's shape outside the node
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &rows = saved[0], &weight = saved[1], &kept = saved[2];
    const bool small = ctx->saved_data["small"].toBool();
    const bool with_bias = ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2);
    const auto activation = static_cast<Activation>(ctx->saved_data["activation"].toInt());
    torch::Tensor grad = activation_backward(as_matrix(grads[0]), kept, activation);
    if (small) grad = grad.contiguous();
    torch::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      grad_x = small ? small_grad_input(grad, weight) : grad.mm(weight);
      grad_x = grad_x.view(ctx->saved_data["shape"].toIntVector());
    }
    if (small && (ctx->needs_input_grad(1) || with_bias)) {
      std::tie(grad_weight, grad_bias) = small_grad_params(grad, rows, weight, with_bias);
    } else {
      if (ctx->needs_input_grad(1)) grad_weight = grad.t().mm(rows);
      if (with_bias) grad_bias = grad.sum(0);
    }
    return {grad_x, grad_weight, grad_bias, torch::Tensor()};
  }
};

class ActivationFunction : public torch::autograd::Function<ActivationFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               int64_t activation_index) {
    const auto activation = static_cast<Activation>(activation_index);
    const torch::Tensor y = activation_forward(x, activation);
    ctx->save_for_backward({kernels::keeps_pre_activation(activation) ? x : y});
    ctx->saved_data["activation"] = activation_index;
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto activation = static_cast<Activation>(ctx->saved_data["activation"].toInt());
    return {activation_backward(grads[0], ctx->get_saved_variables()[0], activation),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor activation(const torch::Tensor& x, Activation activation) {
  if (activation == Activation::none) return x;
  return ActivationFunction::apply(x, static_cast<int64_t>(activation))[0];
}

torch::Tensor activation_reference(const torch::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return x;
    case Activation::gelu:
      return torch::gelu(x);
    case Activation::sigmoid:
      return torch::sigmoid(x);
    case Activation::elu_plus_one:
      return torch::elu(x) + 1;
    case Activation::relu:
      return torch::relu(x);
    case Activation::softplus:
      return torch::softplus(x);
    case Activation::silu:
      return torch::silu(x);
  }
  return x;
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     Activation activation) {
  // What addmm would check; the small-weight kernel reads raw pointers.
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1),
              "linear: input [..., ", x.dim() >= 1 ? x.size(-1) : 0, "] does not fit weight ",
              weight.sizes());
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() && x.device() == weight.device(),
              "linear: input ", x.scalar_type(), " on ", x.device(), ", weight ",
              weight.scalar_type(), " on ", weight.device());
  TORCH_CHECK(!bias.defined() ||
                  (bias.dim() == 1 && bias.size(0) == weight.size(0) &&
                   bias.scalar_type() == weight.scalar_type() && bias.device() == weight.device()),
              "linear: bias must be [", weight.size(0), "] like the weight");
  return LinearFunction::apply(x, weight, present_or_empty(bias, weight),
                               static_cast<int64_t>(activation))[0]
      .view(output_shape(x, weight));
}

}  // namespace memscript::ops
