#include <algorithm>

#include "kernels/embedding/embedding.h"

namespace memscript::kernels {

namespace {

template <typename T>
void backward_blocks(const int64_t* tokens, const T* grad, T* partials, EmbeddingShape s,
                     int64_t begin, int64_t end) {
  const int64_t per_block = embedding_rows_per_block(s);
  for (int64_t b = begin; b < end; ++b) {
    T* partial = partials + b * s.vocab * s.width;
    std::fill(partial, partial + s.vocab * s.width, T(0));
    const int64_t last = std::min(s.rows, (b + 1) * per_block);
    for (int64_t r = b * per_block; r < last; ++r) {
      T* __restrict into = partial + tokens[r] * s.width;
      const T* __restrict row = grad + r * s.width;
      for (int64_t c = 0; c < s.width; ++c) into[c] += row[c];
    }
  }
}

}  // namespace

void embedding_backward_cpu(const int64_t* tokens, const float* grad, float* partials,
                            EmbeddingShape shape, int64_t begin, int64_t end) {
  backward_blocks(tokens, grad, partials, shape, begin, end);
}
void embedding_backward_cpu(const int64_t* tokens, const double* grad, double* partials,
                            EmbeddingShape shape, int64_t begin, int64_t end) {
  backward_blocks(tokens, grad, partials, shape, begin, end);
}

}  // namespace memscript::kernels
