#include "complex_scan.h"

namespace memscript::kernels {

namespace {
template <typename T>
void forward_range(const ComplexScanForward<T>& f, ComplexScanShape shape, int64_t begin,
                   int64_t end) {
  for (int64_t i = begin; i < end; ++i) complex_scan_channel<T, T>(f, shape, i);
}

template <typename T>
void backward_range(const ComplexScanBackward<T>& g, ComplexScanShape shape, int64_t begin,
                    int64_t end) {
  for (int64_t i = begin; i < end; ++i) complex_scan_backward_channel<T, T>(g, shape, i);
}
}  // namespace

void complex_scan_forward_cpu(const ComplexScanForward<float>& f, ComplexScanShape shape,
                              int64_t begin, int64_t end) {
  forward_range(f, shape, begin, end);
}

void complex_scan_forward_cpu(const ComplexScanForward<double>& f, ComplexScanShape shape,
                              int64_t begin, int64_t end) {
  forward_range(f, shape, begin, end);
}

void complex_scan_backward_cpu(const ComplexScanBackward<float>& g, ComplexScanShape shape,
                               int64_t begin, int64_t end) {
  backward_range(g, shape, begin, end);
}

void complex_scan_backward_cpu(const ComplexScanBackward<double>& g, ComplexScanShape shape,
                               int64_t begin, int64_t end) {
  backward_range(g, shape, begin, end);
}

}  // namespace memscript::kernels
