#include "runtime/model/fused/diag_scan.h"

#include "kernels/diag_scan.h"
#include "runtime/model/fused/launch.h"

namespace memscript::fused {

namespace {

using kernels::Bf16Bits;
using kernels::DiagScanGrads;
using kernels::DiagScanShape;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

DiagScanShape shape_of(const torch::Tensor& a) { return {a.size(0), a.size(1), a.size(2)}; }

void run_forward(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0,
                 const torch::Tensor& h, const torch::Tensor& last) {
  const DiagScanShape shape = shape_of(a);
  if (a.is_cuda()) {
    const char* message = nullptr;
    bool launched = false;
    if (a.scalar_type() == torch::kBFloat16) {
      launched = kernels::diag_scan_forward_cuda(
          data<Bf16Bits>(a), data<Bf16Bits>(b), data<Bf16Bits>(h0), data<Bf16Bits>(h),
          data<Bf16Bits>(last), shape, cuda_stream_of(a), &message);
    } else {
      launched = kernels::diag_scan_forward_cuda(data<float>(a), data<float>(b), data<float>(h0),
                                                 data<float>(h), data<float>(last), shape,
                                                 cuda_stream_of(a), &message);
    }
    check_launch(launched, message, "diag_scan forward");
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "diag_scan forward", [&] {
    parallel_over(shape.batch * shape.channels, shape.length, [&](int64_t begin, int64_t end) {
      kernels::diag_scan_forward_cpu(data<scalar_t>(a), data<scalar_t>(b), data<scalar_t>(h0),
                                     data<scalar_t>(h), data<scalar_t>(last), shape, begin, end);
    });
  });
}

template <typename T>
DiagScanGrads<T> grads_of(const torch::Tensor& a, const torch::Tensor& h, const torch::Tensor& h0,
                          const torch::Tensor& grad_h, const torch::Tensor& grad_last,
                          const torch::Tensor& grad_a, const torch::Tensor& grad_b,
                          const torch::Tensor& grad_h0) {
  return {data<T>(a),         data<T>(h),      data<T>(h0),     data<T>(grad_h),
          data<T>(grad_last), data<T>(grad_a), data<T>(grad_b), data<T>(grad_h0)};
}

class DiagScanFunction : public torch::autograd::Function<DiagScanFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& a_in,
                               const torch::Tensor& b_in, const torch::Tensor& h0_in) {
    check_inputs("diag_scan", {a_in, b_in, h0_in}, /*bf16=*/true);
    const torch::Tensor a = a_in.contiguous(), b = b_in.contiguous(), h0 = h0_in.contiguous();
    const torch::Tensor h = torch::empty_like(a), last = torch::empty_like(h0);
    run_forward(a, b, h0, h, last);
    ctx->save_for_backward({a, h, h0});
    return {h, last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &a = saved[0], &h = saved[1], &h0 = saved[2];
    const torch::Tensor grad_h = grads[0].contiguous(), grad_last = grads[1].contiguous();
    const torch::Tensor grad_a = torch::empty_like(a), grad_b = torch::empty_like(a),
                        grad_h0 = torch::empty_like(h0);
    const DiagScanShape shape = shape_of(a);
    if (a.is_cuda()) {
      const char* message = nullptr;
      bool launched = false;
      if (a.scalar_type() == torch::kBFloat16) {
        launched = kernels::diag_scan_backward_cuda(
            grads_of<Bf16Bits>(a, h, h0, grad_h, grad_last, grad_a, grad_b, grad_h0), shape,
            cuda_stream_of(a), &message);
      } else {
        launched = kernels::diag_scan_backward_cuda(
            grads_of<float>(a, h, h0, grad_h, grad_last, grad_a, grad_b, grad_h0), shape,
            cuda_stream_of(a), &message);
      }
      check_launch(launched, message, "diag_scan backward");
    } else {
      AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "diag_scan backward", [&] {
        const DiagScanGrads<scalar_t> g =
            grads_of<scalar_t>(a, h, h0, grad_h, grad_last, grad_a, grad_b, grad_h0);
        parallel_over(shape.batch * shape.channels, shape.length, [&](int64_t begin, int64_t end) {
          kernels::diag_scan_backward_cpu(g, shape, begin, end);
        });
      });
    }
    return {grad_a, grad_b, grad_h0};
  }
};

}  // namespace

DiagScanResult diag_scan(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0) {
  const variable_list out = DiagScanFunction::apply(a, b, h0);
  return {out[0], out[1]};
}

}  // namespace memscript::fused
