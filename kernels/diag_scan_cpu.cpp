#include "diag_scan.h"

namespace memscript::kernels {

namespace {
template <typename T>
void forward_range(const T* a, const T* b, const T* h0, T* h, T* h_last, DiagScanShape shape,
                   int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) diag_scan_channel<T, T>(a, b, h0, h, h_last, shape, i);
}
template <typename T>
void backward_range(const DiagScanGrads<T>& grads, DiagScanShape shape, int64_t begin,
                    int64_t end) {
  for (int64_t i = begin; i < end; ++i) diag_scan_backward_channel<T, T>(grads, shape, i);
}
}  // namespace

void diag_scan_forward_cpu(const float* a, const float* b, const float* h0, float* h, float* h_last,
                           DiagScanShape shape, int64_t begin, int64_t end) {
  forward_range(a, b, h0, h, h_last, shape, begin, end);
}

void diag_scan_forward_cpu(const double* a, const double* b, const double* h0, double* h,
                           double* h_last, DiagScanShape shape, int64_t begin, int64_t end) {
  forward_range(a, b, h0, h, h_last, shape, begin, end);
}

void diag_scan_backward_cpu(const DiagScanGrads<float>& grads, DiagScanShape shape, int64_t begin,
                            int64_t end) {
  backward_range(grads, shape, begin, end);
}

void diag_scan_backward_cpu(const DiagScanGrads<double>& grads, DiagScanShape shape, int64_t begin,
                            int64_t end) {
  backward_range(grads, shape, begin, end);
}

}  // namespace memscript::kernels
