#include "kernels/cross_entropy/cross_entropy.h"

#include <algorithm>

#include "kernels/common/activation.h"
#include "kernels/common/fast_exp.h"
#include "kernels/common/lanes.h"
#include "kernels/common/row_tile.h"

namespace memscript::kernels {

namespace {

// Every row of a block: largest + log Σ exp(logit − largest), NaN where a logit is not finite
// (the fast exp and log map NaN to numbers; a diverged model's loss must stay NaN). Unscored
// rows too, so that the loops have no branch. In T with the exp and log of fast_exp.h and
// activation.h, kTileRows rows per vector: libm's double exp and log per row are a visible share
// of a small model's training step.
// `tile`: scratch for `classes` tile columns.
template <typename T>
void block_log_normalizers(const T* logits, int64_t rows, int64_t classes, Lanes<T>* tile,
                           T* normalizer) {
  T largest[kCrossEntropyRowsPerBlock], sum[kCrossEntropyRowsPerBlock];
  for (int64_t first = 0; first < rows; first += kTileRows) {
    const int64_t count = std::min(kTileRows, rows - first);
    load_tile(logits + first * classes, classes, classes, count, tile);  // tile[c]: class c
    Lanes<T> tile_largest = tile[0];
    for (int64_t c = 1; c < classes; ++c) {
      tile_largest = tile_largest < tile[c] ? tile[c] : tile_largest;  // std::max lane by lane
    }
    Lanes<T> tile_sum{}, nan_if_not_finite{};
    for (int64_t c = 0; c < classes; ++c) {
      tile_sum += exp_lanes(tile[c] - tile_largest);
      nan_if_not_finite += tile[c] - tile[c];
    }
    store_lanes(tile_largest + nan_if_not_finite, count, largest + first);
    store_lanes(tile_sum, count, sum + first);
  }
  for (int64_t r = 0; r < rows; ++r) normalizer[r] = largest[r] + log_of(sum[r]);
}

template <typename T>
void forward_blocks(const CrossEntropyArgs<T>& a, CrossEntropyShape shape,
                    CrossEntropyBlock* blocks, int64_t begin, int64_t end) {
  TileScratch<T> tile(shape.classes);
  for (int64_t b = begin; b < end; ++b) {
    CrossEntropyBlock block;
    const int64_t first = b * kCrossEntropyRowsPerBlock;
    const int64_t rows = std::min(shape.rows - first, kCrossEntropyRowsPerBlock);
    block_log_normalizers(a.logits + first * shape.classes, rows, shape.classes, tile.data(),
                          a.log_normalizer + first);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = first + i;
      if (!a.mask[r]) continue;
      const int64_t target = a.targets[r];
      if (target < 0 || target >= shape.classes) {
        if (block.bad_row < 0) block.bad_row = r;
        continue;
      }
      block.loss_sum += static_cast<double>(a.log_normalizer[r]) -
                        static_cast<double>(a.logits[r * shape.classes + target]);
      ++block.scored;
    }
    blocks[b] = block;
  }
}

// The softmax of all rows in one flat loop that vectorizes (every row's normalizer is set by the
// forward), then unscored rows zeroed and the targets subtracted.
template <typename T>
void backward_rows(const CrossEntropyArgs<T>& a, CrossEntropyShape shape, double scale,
                   T* grad_logits, int64_t begin, int64_t end) {
  const T scale_t = static_cast<T>(scale);
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t c = 0; c < shape.classes; ++c) {
      const int64_t i = r * shape.classes + c;
      grad_logits[i] = a.logits[i] - a.log_normalizer[r];
    }
  }
  T* const grad = grad_logits + begin * shape.classes;
  const int64_t count = (end - begin) * shape.classes;
  for (int64_t i = 0; i < count; ++i) grad[i] = exp_of(grad[i]) * scale_t;
  for (int64_t r = begin; r < end; ++r) {
    T* row = grad_logits + r * shape.classes;
    if (a.mask[r]) {
      row[a.targets[r]] -= scale_t;
    } else {
      std::fill(row, row + shape.classes, T(0));
    }
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
