#include "kernels/linear_attention/linear_attention.h"

namespace memscript::kernels {

namespace {
template <typename T>
void forward_heads(const LinearAttentionForward<T>& p, int64_t begin, int64_t end) {
  with_fixed_dims(p.shape.key_dim, p.shape.value_dim, [&]<int64_t KeyDim, int64_t ValueDim>() {
    for (int64_t head = begin; head < end; ++head)
      linear_attention_forward_head<T, KeyDim, ValueDim>(p, head);
  });
}
template <typename T>
void backward_heads(const LinearAttentionBackward<T>& p, int64_t begin, int64_t end) {
  with_fixed_dims(p.shape.key_dim, p.shape.value_dim, [&]<int64_t KeyDim, int64_t ValueDim>() {
    for (int64_t head = begin; head < end; ++head)
      linear_attention_backward_head<T, KeyDim, ValueDim>(p, head);
  });
}
}  // namespace

void linear_attention_forward_cpu(const LinearAttentionForward<float>& p, int64_t begin,
                                  int64_t end) {
  forward_heads(p, begin, end);
}
void linear_attention_forward_cpu(const LinearAttentionForward<double>& p, int64_t begin,
                                  int64_t end) {
  forward_heads(p, begin, end);
}
void linear_attention_backward_cpu(const LinearAttentionBackward<float>& p, int64_t begin,
                                   int64_t end) {
  backward_heads(p, begin, end);
}
void linear_attention_backward_cpu(const LinearAttentionBackward<double>& p, int64_t begin,
                                   int64_t end) {
  backward_heads(p, begin, end);
}

}  // namespace memscript::kernels
