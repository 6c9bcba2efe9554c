#include "runtime/ops/complex_scan/complex_scan.h"

#include "kernels/complex_scan/complex_scan.h"
#include "runtime/ops/common/launch.h"

namespace memscript::ops {

namespace {

using kernels::ComplexScanBackward;
using kernels::ComplexScanForward;
using kernels::ComplexScanShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

ComplexScanShape shape_of(const torch::Tensor& b) { return {b.size(0), b.size(1), b.size(2)}; }

template <typename T>
ComplexScanForward<T> forward_args(const variable_list& in, const variable_list& out) {
  return {data<T>(in[0]), data<T>(in[1]),  data<T>(in[2]),  data<T>(in[3]),  data<T>(in[4]),
          data<T>(in[5]), data<T>(out[0]), data<T>(out[1]), data<T>(out[2]), data<T>(out[3])};
}

// saved: λre, λim, h_re, h_im, h0_re, h0_im; grads: of h_re, h_im, last_re, last_im;
// out: grad b_re, b_im, h0_re, h0_im, then the per-batch λ sums re, im.
template <typename T>
ComplexScanBackward<T> backward_args(const variable_list& saved, const variable_list& grads,
                                     const variable_list& out) {
  return {data<T>(saved[0]), data<T>(saved[1]), data<T>(saved[2]), data<T>(saved[3]),
          data<T>(saved[4]), data<T>(saved[5]), data<T>(grads[0]), data<T>(grads[1]),
          data<T>(grads[2]), data<T>(grads[3]), data<T>(out[0]),   data<T>(out[1]),
          data<T>(out[2]),   data<T>(out[3]),   data<T>(out[4]),   data<T>(out[5])};
}

variable_list contiguous(const variable_list& tensors) {
  variable_list result;
  for (const torch::Tensor& t : tensors) result.push_back(t.contiguous());
  return result;
}

class ComplexScanFunction : public torch::autograd::Function<ComplexScanFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& lambda_re,
                               const torch::Tensor& lambda_im, const torch::Tensor& b_re,
                               const torch::Tensor& b_im, const torch::Tensor& h0_re,
                               const torch::Tensor& h0_im) {
    check_inputs("complex_scan", {lambda_re, lambda_im, b_re, b_im, h0_re, h0_im});
    const variable_list in = contiguous({lambda_re, lambda_im, b_re, b_im, h0_re, h0_im});
    const variable_list out = {torch::empty_like(in[2]), torch::empty_like(in[2]),
                               torch::empty_like(in[4]), torch::empty_like(in[4])};
    const ComplexScanShape shape = shape_of(in[2]);
    if (in[2].is_cuda()) {
      const char* message = nullptr;
      check_launch(kernels::complex_scan_forward_cuda(forward_args<float>(in, out), shape,
                                                      cuda_stream_of(in[2]), &message),
                   message, "complex_scan forward");
    } else {
      AT_DISPATCH_FLOATING_TYPES(in[2].scalar_type(), "complex_scan forward", [&] {
        const ComplexScanForward<scalar_t> f = forward_args<scalar_t>(in, out);
        parallel_over(shape.batch, shape.length * shape.channels, [&](int64_t begin, int64_t end) {
          kernels::complex_scan_forward_cpu(f, shape, begin, end);
        });
      });
    }
    ctx->save_for_backward({in[0], in[1], out[0], out[1], in[4], in[5]});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    grads = contiguous(grads);
    const torch::Tensor& h_re = saved[2];
    const variable_list out = {torch::empty_like(h_re),     torch::empty_like(h_re),
                               torch::empty_like(saved[4]), torch::empty_like(saved[4]),
                               torch::empty_like(saved[4]), torch::empty_like(saved[4])};
    const ComplexScanShape shape = shape_of(h_re);
    if (h_re.is_cuda()) {
      const char* message = nullptr;
      check_launch(kernels::complex_scan_backward_cuda(backward_args<float>(saved, grads, out),
                                                       shape, cuda_stream_of(h_re), &message),
                   message, "complex_scan backward");
    } else {
      AT_DISPATCH_FLOATING_TYPES(h_re.scalar_type(), "complex_scan backward", [&] {
        const ComplexScanBackward<scalar_t> g = backward_args<scalar_t>(saved, grads, out);
        parallel_over(shape.batch, shape.length * shape.channels, [&](int64_t begin, int64_t end) {
          kernels::complex_scan_backward_cpu(g, shape, begin, end);
        });
      });
    }
    // λ's gradient: each batch row's share, summed here rather than across threads.
    return {out[4].sum(0), out[5].sum(0), out[0], out[1], out[2], out[3]};
  }
};

}  // namespace

ComplexScanResult complex_scan(const torch::Tensor& lambda_re, const torch::Tensor& lambda_im,
                               const torch::Tensor& b_re, const torch::Tensor& b_im,
                               const torch::Tensor& h0_re, const torch::Tensor& h0_im) {
  if (!kernels_take(b_re))
    return complex_scan_reference(lambda_re, lambda_im, b_re, b_im, h0_re, h0_im);
  const variable_list out =
      ComplexScanFunction::apply(lambda_re, lambda_im, b_re, b_im, h0_re, h0_im);
  return {out[0], out[1], out[2], out[3]};
}

// The reference: the same op composed of libtorch ops. It runs where the kernels do not take
// the tensors (kernels_take) and is what the tests hold the kernels to.
ComplexScanResult complex_scan_reference(const torch::Tensor& lambda_re,
                                         const torch::Tensor& lambda_im, const torch::Tensor& b_re,
                                         const torch::Tensor& b_im, const torch::Tensor& h0_re,
                                         const torch::Tensor& h0_im) {
  torch::Tensor re = h0_re, im = h0_im;
  std::vector<torch::Tensor> res, ims;
  res.reserve(static_cast<size_t>(b_re.size(1)));
  ims.reserve(static_cast<size_t>(b_re.size(1)));
  for (int64_t t = 0; t < b_re.size(1); ++t) {
    // (λ_re + iλ_im)(re + i·im) + b, multiplied out.
    torch::Tensor next_re = lambda_re * re - lambda_im * im + b_re.select(1, t);
    im = lambda_im * re + lambda_re * im + b_im.select(1, t);
    re = std::move(next_re);
    res.push_back(re);
    ims.push_back(im);
  }
  return {torch::stack(res, 1), torch::stack(ims, 1), re, im};
}

}  // namespace memscript::ops
