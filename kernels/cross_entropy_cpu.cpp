#include "cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace memscript::kernels {

namespace {

template <typename T>
double log_sum_exp(const T* row, int64_t classes) {
  double largest = row[0];
  for (int64_t c = 1; c < classes; ++c) largest = std::max<double>(largest, row[c]);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - largest);
  return largest + std::log(sum);
}

template <typename T>
void forward_blocks(const CrossEntropyArgs<T>& a, CrossEntropyShape shape,
                    CrossEntropyBlock* blocks, int64_t begin, int64_t end) {
  for (int64_t b = begin; b < end; ++b) {
    CrossEntropyBlock block;
    const int64_t first = b * kCrossEntropyRowsPerBlock;
    const int64_t last = std::min(shape.rows, first + kCrossEntropyRowsPerBlock);
    for (int64_t r = first; r < last; ++r) {
      if (!a.mask[r]) continue;
      const int64_t target = a.targets[r];
      if (target < 0 || target >= shape.classes) {
        if (block.bad_row < 0) block.bad_row = r;
        continue;
      }
      const T* row = a.logits + r * shape.classes;
      const double normalizer = log_sum_exp(row, shape.classes);
      a.log_normalizer[r] = static_cast<T>(normalizer);
      block.loss_sum += normalizer - row[target];
      ++block.scored;
    }
    blocks[b] = block;
  }
}

template <typename T>
void backward_rows(const CrossEntropyArgs<T>& a, CrossEntropyShape shape, double scale,
                   T* grad_logits, int64_t begin, int64_t end) {
  const T scale_t = static_cast<T>(scale);
  for (int64_t r = begin; r < end; ++r) {
    T* grad = grad_logits + r * shape.classes;
    if (!a.mask[r]) {
      std::fill(grad, grad + shape.classes, T(0));
      continue;
    }
    const T* row = a.logits + r * shape.classes;
    const T normalizer = a.log_normalizer[r];
    for (int64_t c = 0; c < shape.classes; ++c) grad[c] = std::exp(row[c] - normalizer) * scale_t;
    grad[a.targets[r]] -= scale_t;
  }
}

}  // namespace

void cross_entropy_forward_cpu(const CrossEntropyArgs<float>& args, CrossEntropyShape shape,
                               CrossEntropyBlock* blocks, int64_t begin, int64_t end) {
  forward_blocks(args, shape, blocks, begin, end);
}
void cross_entropy_forward_cpu(const CrossEntropyArgs<double>& args, CrossEntropyShape shape,
                               CrossEntropyBlock* blocks, int64_t begin, int64_t end) {
  forward_blocks(args, shape, blocks, begin, end);
}
void cross_entropy_backward_cpu(const CrossEntropyArgs<float>& args, CrossEntropyShape shape,
                                double scale, float* grad_logits, int64_t begin, int64_t end) {
  backward_rows(args, shape, scale, grad_logits, begin, end);
}
void cross_entropy_backward_cpu(const CrossEntropyArgs<double>& args, CrossEntropyShape shape,
                                double scale, double* grad_logits, int64_t begin, int64_t end) {
  backward_rows(args, shape, scale, grad_logits, begin, end);
}

}  // namespace memscript::kernels
