// Linked instead of the .cu files when memscript is built without CUDA: every launcher fails
// with the same message. An op with CUDA kernels adds its launchers here.
#include "kernels/common/cuda_device.h"
#include "kernels/complex_scan/complex_scan.h"
#include "kernels/delta_rule/delta_rule.h"
#include "kernels/gated_scan/gated_scan.h"
#include "kernels/linear_attention/linear_attention.h"
#include "kernels/lstm/lstm.h"
#include "kernels/selective_scan/selective_scan.h"

namespace memscript::kernels {

namespace {
bool no_cuda(const char** message) {
  if (message)
    *message = "memscript was built without CUDA kernels (MEMSCRIPT_CUDA=OFF or no nvcc)";
  return false;
}
}  // namespace

bool complex_scan_forward_cuda(const ComplexScanForward<float>&, ComplexScanShape, void*,
                               const char** message) {
  return no_cuda(message);
}
bool complex_scan_backward_cuda(const ComplexScanBackward<float>&, ComplexScanShape, void*,
                                const char** message) {
  return no_cuda(message);
}
bool selective_scan_forward_cuda(const SelectiveScanForward<float, float>&, SelectiveScanShape,
                                 void*, const char** message) {
  return no_cuda(message);
}
bool selective_scan_backward_cuda(const SelectiveScanBackward<float, float>&, SelectiveScanShape,
                                  void*, const char** message) {
  return no_cuda(message);
}

bool gated_scan_forward_cuda(GatedCellKind, const GatedScanForward<float>&, GatedScanShape, void*,
                             const char** message) {
  return no_cuda(message);
}
bool gated_scan_forward_cuda(GatedCellKind, const GatedScanForward<Bf16>&, GatedScanShape, void*,
                             const char** message) {
  return no_cuda(message);
}
bool gated_scan_backward_cuda(GatedCellKind, const GatedScanBackward<float>&, GatedScanShape, void*,
                              const char** message) {
  return no_cuda(message);
}
bool gated_scan_backward_cuda(GatedCellKind, const GatedScanBackward<Bf16>&, GatedScanShape, void*,
                              const char** message) {
  return no_cuda(message);
}

bool lstm_forward_cuda(const LstmForward<float>&, LstmShape, void*, const char** message) {
  return no_cuda(message);
}
bool lstm_backward_cuda(const LstmBackward<float>&, LstmShape, void*, const char** message) {
  return no_cuda(message);
}

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

bool cuda_kernels_compiled() { return false; }

int cuda_device_count() { return 0; }

}  // namespace memscript::kernels
