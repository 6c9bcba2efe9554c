#include "runtime/ops/causal_conv/causal_conv.h"

#include "kernels/causal_conv/causal_conv.h"
#include "kernels/common/block_sum.h"
#include "runtime/ops/common/kernel_args.h"
#include "runtime/ops/linear/linear.h"

namespace memscript::ops {

namespace {

using kernels::CausalConvInputLayout;
using kernels::CausalConvShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kOp = "fused causal conv";

CausalConvShape shape_of(const torch::Tensor& x, const torch::Tensor& weight) {
  return {x.size(0), x.size(1), x.size(2), weight.size(-1)};
}

CausalConvInputLayout layout_of(const torch::Tensor& x) { return {x.stride(0), x.stride(1)}; }

template <typename T>
kernels::CausalConvWeights<T> weights_of(const torch::Tensor& weight, const torch::Tensor& bias) {
  return {data<T>(weight), data<T>(bias)};
}

// Multiply-adds per batch row, roughly (the taps and the SiLU's exponential and division): what
// sizes the thread pool's chunks.
void run_rows(const CausalConvShape& s, int64_t factor,
              const std::function<void(int64_t, int64_t)>& body) {
  parallel_over(s.batch, factor * s.length * s.channels * (s.kernel + 12), body);
}

class CausalConvFunction : public torch::autograd::Function<CausalConvFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& window_or_empty, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    const CausalConvShape shape = shape_of(x, weight);
    const torch::Tensor window = undefined_if_empty(window_or_empty);
    const torch::Tensor u = torch::empty(x.sizes(), x.options());
    const torch::Tensor after =
        torch::empty({shape.batch, shape.channels, shape.kernel - 1}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
      const kernels::CausalConvForward<scalar_t> args{weights_of<scalar_t>(weight, bias),
                                                      data<scalar_t>(x), data<scalar_t>(window),
                                                      data<scalar_t>(u), data<scalar_t>(after)};
      run_rows(shape, 1, [&](int64_t begin, int64_t end) {
        kernels::causal_conv_forward_cpu(args, shape, layout_of(x), begin, end);
      });
    });
    ctx->save_for_backward({x, window_or_empty, weight, bias});
    return {u, after};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[2], &bias = saved[3];
    const torch::Tensor window = undefined_if_empty(saved[1]);
    const CausalConvShape shape = shape_of(x, weight);
    const torch::Tensor grad_u =
        grads[0].defined() ? grads[0].contiguous() : torch::zeros(x.sizes(), x.options());
    const torch::Tensor grad_after = grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
    const int64_t count = kernels::causal_conv_parameter_count(shape);
    const torch::Tensor grad_x = torch::empty(x.sizes(), x.options());
    // A kernel of 1 has an empty window, which gets an empty gradient like any other input.
    const torch::Tensor grad_window =
        window.defined() ? torch::empty_like(window) : torch::zeros_like(saved[1]);
    const torch::Tensor partials = torch::empty({shape.batch, count}, x.options());
    const torch::Tensor sums = torch::empty({count}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), kOp, [&] {
      const kernels::CausalConvBackward<scalar_t> args{weights_of<scalar_t>(weight, bias),
                                                       data<scalar_t>(x),
                                                       data<scalar_t>(window),
                                                       data<scalar_t>(grad_u),
                                                       data<scalar_t>(grad_after),
                                                       data<scalar_t>(grad_x),
                                                       data<scalar_t>(grad_window),
                                                       data<scalar_t>(partials)};
      run_rows(shape, 3, [&](int64_t begin, int64_t end) {
        kernels::causal_conv_backward_cpu(args, shape, layout_of(x), begin, end);
      });
      kernels::sum_blocks_cpu(data<scalar_t>(partials), shape.batch, count, data<scalar_t>(sums));
    });
    // The partial's order: ∂w as [K, channels], then ∂b.
    const int64_t taps = shape.kernel * shape.channels;
    const torch::Tensor grad_weight = sums.narrow(0, 0, taps)
                                          .view({shape.kernel, shape.channels})
                                          .t()
                                          .contiguous()
                                          .view(weight.sizes());
    const torch::Tensor grad_bias = sums.narrow(0, taps, shape.channels).clone();
    return {grad_x, grad_window, grad_weight, grad_bias};
  }
};

bool runs_on_kernels(const torch::Tensor& x, const torch::Tensor& window,
                     const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!on_cpu_kernels(x) || x.dim() != 3 || x.numel() == 0 || x.stride(2) != 1) return false;
  for (const torch::Tensor& t : {window, weight, bias}) {
    if (t.defined() && (t.scalar_type() != x.scalar_type() || !t.is_cpu())) return false;
  }
  return weight.defined() && bias.defined();
}

void check_shapes(const torch::Tensor& x, const torch::Tensor& window, const torch::Tensor& weight,
                  const torch::Tensor& bias) {
  const int64_t channels = x.size(2);
  TORCH_CHECK(
      weight.dim() == 3 && weight.size(0) == channels && weight.size(1) == 1 && weight.size(2) >= 1,
      kOp, ": the weight must be [", channels, ", 1, K], got ", weight.sizes());
  TORCH_CHECK(bias.sizes() == torch::IntArrayRef({channels}), kOp, ": the bias must be [", channels,
              "], got ", bias.sizes());
  const std::vector<int64_t> window_shape = {x.size(0), channels, weight.size(2) - 1};
  TORCH_CHECK(!window.defined() || window.sizes() == torch::IntArrayRef(window_shape), kOp,
              ": the window must be ", torch::IntArrayRef(window_shape), ", got ", window.sizes());
}

}  // namespace

CausalConvResult causal_conv_silu(const torch::Tensor& x, const torch::Tensor& window,
                                  const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!runs_on_kernels(x, window, weight, bias))
    return causal_conv_silu_reference(x, window, weight, bias);
  check_shapes(x, window, weight, bias);
  const variable_list out = CausalConvFunction::apply(
      x, present_or_empty(window.defined() ? window.contiguous() : window, x), weight.contiguous(),
      bias.contiguous());
  return CausalConvResult{out[0], out[1]};
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
CausalConvResult causal_conv_silu_reference(const torch::Tensor& x, const torch::Tensor& window,
                                            const torch::Tensor& weight,
                                            const torch::Tensor& bias) {
  const int64_t keep = weight.size(-1) - 1;
  const torch::Tensor before =
      window.defined() ? window : torch::zeros({x.size(0), x.size(2), keep}, x.options());
  // No tokens: nothing to convolve (conv1d refuses a kernel longer than its input), and the
  // window passes through.
  if (x.size(1) == 0) return {torch::empty_like(x), before};
  const torch::Tensor padded = torch::cat({before, x.transpose(1, 2)}, 2);
  const std::vector<int64_t> one = {1}, none = {0};  // stride and dilation; padding
  const torch::Tensor convolved =
      torch::conv1d(padded, weight, bias, one, none, one, /*groups=*/x.size(2)).transpose(1, 2);
  return {activation(convolved, Activation::silu), padded.narrow(2, padded.size(2) - keep, keep)};
}

}  // namespace memscript::ops
