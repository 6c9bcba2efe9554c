#pragma once

// The token embedding's weight gradient: grad_W[v] = Σ over the rows whose token is v of that
// row's gradient. libtorch's CPU embedding backward sorts the tokens first, which cost a tenth
// of a seed-mini training step. Here each fixed block of rows adds its rows in order into a
// partial [vocab, width] gradient, and the partials are added in block order (block_sum.h): the
// same bits for any thread count. Blocks are kept few (at most kEmbeddingMaxBlocks, each at
// least kEmbeddingMinRowsPerBlock rows), since every block's partial covers the whole vocabulary.

#include <cstdint>

namespace memscript::kernels {

struct EmbeddingShape {
  int64_t rows;   // tokens
  int64_t vocab;  // rows of the weight
  int64_t width;  // columns of the weight
};

constexpr int64_t kEmbeddingMinRowsPerBlock = 1024;
constexpr int64_t kEmbeddingMaxBlocks = 16;

inline int64_t embedding_rows_per_block(EmbeddingShape shape) {
  const int64_t spread = (shape.rows + kEmbeddingMaxBlocks - 1) / kEmbeddingMaxBlocks;
  return spread > kEmbeddingMinRowsPerBlock ? spread : kEmbeddingMinRowsPerBlock;
}
inline int64_t embedding_blocks(EmbeddingShape shape) {
  const int64_t per_block = embedding_rows_per_block(shape);
  return (shape.rows + per_block - 1) / per_block;
}

// Blocks [begin, end): block b writes its [vocab, width] partial at partials + b · vocab · width.
// Every token must lie in [0, vocab) (the forward's lookup checked them).
void embedding_backward_cpu(const int64_t* tokens, const float* grad, float* partials,
                            EmbeddingShape shape, int64_t begin, int64_t end);
void embedding_backward_cpu(const int64_t* tokens, const double* grad, double* partials,
                            EmbeddingShape shape, int64_t begin, int64_t end);

}  // namespace memscript::kernels
