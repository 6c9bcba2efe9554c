#include "selective_scan.h"

namespace memscript::kernels {

namespace {
template <typename T>
void forward_range(const SelectiveScanForward<T, T>& f, SelectiveScanShape s, int64_t begin,
                   int64_t end) {
  for (int64_t i = begin; i < end; ++i) selective_scan_channel<T, T>(f, s, i);
}

template <typename T>
void backward_range(const SelectiveScanBackward<T, T>& g, SelectiveScanShape s, int64_t begin,
                    int64_t end) {
  for (int64_t i = begin; i < end; ++i) selective_scan_backward_group<T, T>(g, s, i);
}
}  // namespace

void selective_scan_forward_cpu(const SelectiveScanForward<float, float>& f, SelectiveScanShape s,
                                int64_t begin, int64_t end) {
  forward_range(f, s, begin, end);
}

void selective_scan_forward_cpu(const SelectiveScanForward<double, double>& f, SelectiveScanShape s,
                                int64_t begin, int64_t end) {
  forward_range(f, s, begin, end);
}

void selective_scan_backward_cpu(const SelectiveScanBackward<float, float>& g, SelectiveScanShape s,
                                 int64_t begin, int64_t end) {
  backward_range(g, s, begin, end);
}

void selective_scan_backward_cpu(const SelectiveScanBackward<double, double>& g,
                                 SelectiveScanShape s, int64_t begin, int64_t end) {
  backward_range(g, s, begin, end);
}

}  // namespace memscript::kernels
