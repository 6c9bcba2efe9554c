#include "kernels/common/activation.h"

namespace memscript::kernels {

namespace {

template <typename T>
void forward(ActivationKind kind, const T* pre, T* y, int64_t count) {
  with_activation(kind, [&]<ActivationKind Kind>() { activate_all<Kind>(pre, y, count); });
}

template <typename T>
void backward(ActivationKind kind, const T* grad_y, const T* kept, T* grad_pre, int64_t count) {
  with_activation(kind, [&]<ActivationKind Kind>() {
    for (int64_t j = 0; j < count; ++j) grad_pre[j] = activation_backward<Kind>(grad_y[j], kept[j]);
  });
}

}  // namespace

void activation_forward_cpu(ActivationKind kind, const float* pre, float* y, int64_t count) {
  forward(kind, pre, y, count);
}
void activation_forward_cpu(ActivationKind kind, const double* pre, double* y, int64_t count) {
  forward(kind, pre, y, count);
}
void activation_backward_cpu(ActivationKind kind, const float* grad_y, const float* kept,
                             float* grad_pre, int64_t count) {
  backward(kind, grad_y, kept, grad_pre, count);
}
void activation_backward_cpu(ActivationKind kind, const double* grad_y, const double* kept,
                             double* grad_pre, int64_t count) {
  backward(kind, grad_y, kept, grad_pre, count);
}

}  // namespace memscript::kernels
