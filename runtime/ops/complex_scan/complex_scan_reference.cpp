#include "runtime/ops/complex_scan/complex_scan.h"

namespace memscript::ops {

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
