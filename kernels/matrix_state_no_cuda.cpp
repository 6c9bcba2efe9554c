// Linked instead of matrix_state_cuda.cu when memscript is built without CUDA.
#include "delta_rule.h"
#include "linear_attention.h"

namespace memscript::kernels {

namespace {
bool no_cuda(const char** message) {
  if (message)
    *message = "memscript was built without CUDA kernels (MEMSCRIPT_CUDA=OFF or no nvcc)";
  return false;
}
}  // namespace

bool delta_rule_forward_cuda(const DeltaRuleForward<float>&, void*, const char** message) {
  return no_cuda(message);
}
bool delta_rule_forward_cuda(const DeltaRuleForward<Bf16>&, void*, const char** message) {
  return no_cuda(message);
}
bool delta_rule_backward_cuda(const DeltaRuleBackward<float>&, void*, const char** message) {
  return no_cuda(message);
}
bool delta_rule_backward_cuda(const DeltaRuleBackward<Bf16>&, void*, const char** message) {
  return no_cuda(message);
}
bool linear_attention_forward_cuda(const LinearAttentionForward<float>&, void*,
                                   const char** message) {
  return no_cuda(message);
}
bool linear_attention_forward_cuda(const LinearAttentionForward<Bf16>&, void*,
                                   const char** message) {
  return no_cuda(message);
}
bool linear_attention_backward_cuda(const LinearAttentionBackward<float>&, void*,
                                    const char** message) {
  return no_cuda(message);
}
bool linear_attention_backward_cuda(const LinearAttentionBackward<Bf16>&, void*,
                                    const char** message) {
  return no_cuda(message);
}

}  // namespace memscript::kernels
