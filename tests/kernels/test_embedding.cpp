// The embedding's weight gradient (kernels/embedding/embedding.h) against the sums written out,
// over several blocks of rows, and split into block ranges.

#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "kernel_harness.h"
#include "kernels/common/block_sum.h"
#include "kernels/embedding/embedding.h"

using namespace memscript::kernels;
using memscript::kernels::test::random_values;
using memscript::kernels::test::require_close;

namespace {

std::vector<int64_t> random_tokens(int64_t rows, int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> draw(0, vocab - 1);
  std::vector<int64_t> tokens(static_cast<size_t>(rows));
  for (int64_t& t : tokens) t = draw(rng);
  return tokens;
}

std::vector<double> kernel_gradient(const std::vector<int64_t>& tokens,
                                    const std::vector<double>& grad, EmbeddingShape s,
                                    int64_t split) {
  const int64_t blocks = embedding_blocks(s);
  std::vector<double> partials(static_cast<size_t>(blocks * s.vocab * s.width), -7);
  for (int64_t b = 0; b < blocks; b += split)
    embedding_backward_cpu(tokens.data(), grad.data(), partials.data(), s, b,
                           std::min(blocks, b + split));
  std::vector<double> sum(static_cast<size_t>(s.vocab * s.width), -7);
  sum_blocks_cpu(partials.data(), blocks, s.vocab * s.width, sum.data());
  return sum;
}

}  // namespace

TEST_CASE("the embedding's weight gradient adds each token's rows") {
  // One short block; several blocks and a partial last one; more blocks than the cap allows.
  const auto [rows, vocab, width] =
      GENERATE(std::make_tuple(7, 3, 4), std::make_tuple(2500, 5, 3), std::make_tuple(40000, 2, 4));
  const EmbeddingShape s{rows, vocab, width};
  INFO("rows " << rows << ", vocab " << vocab << ", width " << width);
  CHECK(embedding_blocks(s) <= kEmbeddingMaxBlocks);
  const std::vector<int64_t> tokens = random_tokens(rows, vocab, 1);
  const std::vector<double> grad = random_values(static_cast<size_t>(rows * width), -1, 1, 2);
  std::vector<double> expected(static_cast<size_t>(vocab * width), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) expected[tokens[r] * width + c] += grad[r * width + c];
  }
  const std::vector<double> whole = kernel_gradient(tokens, grad, s, embedding_blocks(s));
  require_close(whole, expected, 1e-12);
  CHECK(kernel_gradient(tokens, grad, s, 1) == whole);  // block ranges: the same bits
}
