#include "lstm.h"

namespace memscript::kernels {

void lstm_forward_cpu(const LstmForward<float>& a, LstmShape s, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) lstm_forward_row(a, s, n);
}
void lstm_forward_cpu(const LstmForward<double>& a, LstmShape s, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) lstm_forward_row(a, s, n);
}
void lstm_backward_cpu(const LstmBackward<float>& a, LstmShape s, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) lstm_backward_row(a, s, n);
}
void lstm_backward_cpu(const LstmBackward<double>& a, LstmShape s, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) lstm_backward_row(a, s, n);
}

}  // namespace memscript::kernels
