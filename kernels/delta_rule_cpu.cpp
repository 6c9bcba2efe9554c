#include "delta_rule.h"

namespace memscript::kernels {

namespace {
template <typename T>
void forward_rows(const DeltaRuleForward<T>& p, int64_t begin, int64_t end) {
  with_fixed_dims(p.shape.key_dim, p.shape.value_dim, [&]<int64_t KeyDim, int64_t>() {
    for (int64_t row = begin; row < end; ++row) delta_rule_forward_row<T, KeyDim>(p, row);
  });
}
template <typename T>
void backward_heads(const DeltaRuleBackward<T>& p, int64_t begin, int64_t end) {
  with_fixed_dims(p.shape.key_dim, p.shape.value_dim, [&]<int64_t KeyDim, int64_t ValueDim>() {
    for (int64_t head = begin; head < end; ++head)
      delta_rule_backward_head<T, KeyDim, ValueDim>(p, head);
  });
}
}  // namespace

void delta_rule_forward_cpu(const DeltaRuleForward<float>& p, int64_t begin, int64_t end) {
  forward_rows(p, begin, end);
}
void delta_rule_forward_cpu(const DeltaRuleForward<double>& p, int64_t begin, int64_t end) {
  forward_rows(p, begin, end);
}
void delta_rule_backward_cpu(const DeltaRuleBackward<float>& p, int64_t begin, int64_t end) {
  backward_heads(p, begin, end);
}
void delta_rule_backward_cpu(const DeltaRuleBackward<double>& p, int64_t begin, int64_t end) {
  backward_heads(p, begin, end);
}

}  // namespace memscript::kernels
