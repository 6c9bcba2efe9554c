#pragma once

// Cross-entropy over the scored rows of a contiguous [rows, classes] array of logits, the loss
// of every training step:
//   loss_r = logsumexp(logits_r) − logits_r[target_r]      for rows with mask_r set
//   sum = Σ_r loss_r,  count = number of scored rows
// Backward, for a loss scaled by `scale` (1/count for the mean, 1 for the sum):
//   dlogits_r = scale · (softmax(logits_r) − onehot(target_r)) on scored rows, 0 elsewhere.
//
// Rows go in fixed blocks of kCrossEntropyRowsPerBlock; each block sums its rows in double and
// the blocks are added in order, so the loss is the same bits for any thread count.

#include <cstdint>

namespace memscript::kernels {

struct CrossEntropyShape {
  int64_t rows;
  int64_t classes;
};

constexpr int64_t kCrossEntropyRowsPerBlock = 256;

inline int64_t cross_entropy_blocks(CrossEntropyShape shape) {
  return (shape.rows + kCrossEntropyRowsPerBlock - 1) / kCrossEntropyRowsPerBlock;
}

// What one block of rows found.
struct CrossEntropyBlock {
  double loss_sum = 0;
  int64_t scored = 0;
  int64_t bad_row = -1;  // the first scored row whose target is outside [0, classes), or -1
};

template <typename T>
struct CrossEntropyArgs {
  const T* logits;         // [rows, classes]
  const int64_t* targets;  // [rows]
  const bool* mask;        // [rows]
  T* log_normalizer;       // [rows]: logsumexp of each row (forward out, backward in)
};

// Blocks [begin, end): fills log_normalizer for their rows and blocks[b] for each.
void cross_entropy_forward_cpu(const CrossEntropyArgs<float>& args, CrossEntropyShape shape,
                               CrossEntropyBlock* blocks, int64_t begin, int64_t end);
void cross_entropy_forward_cpu(const CrossEntropyArgs<double>& args, CrossEntropyShape shape,
                               CrossEntropyBlock* blocks, int64_t begin, int64_t end);

// Rows [begin, end) of grad_logits.
void cross_entropy_backward_cpu(const CrossEntropyArgs<float>& args, CrossEntropyShape shape,
                                double scale, float* grad_logits, int64_t begin, int64_t end);
void cross_entropy_backward_cpu(const CrossEntropyArgs<double>& args, CrossEntropyShape shape,
                                double scale, double* grad_logits, int64_t begin, int64_t end);

}  // namespace memscript::kernels
