#pragma once

// y = x Wᵀ + b for weight matrices small enough that a BLAS call costs more than its
// arithmetic (the projections of the seed-mini decoder: 4 × 16, 8 × 4, …), with the backward's
// three products. x: [rows, in], W: [out, in], b: [out], y: [rows, out], all contiguous.
//
//   forward    y[r, :]  = b + Σ_i x[r, i] · Wᵀ[i, :]
//   grad_x     gx[r, :] = Σ_o g[r, o] · W[o, :]
//   grad_W     gW[o, :] = Σ_r g[r, o] · x[r, :],   grad_b = Σ_r g[r, :]
//
// Rows go through in tiles of kTileRows (row_tile.h), each row in its own vector lane: the
// forward and grad_x sum over their inputs in order, as a loop over one row would. The sums over
// rows (grad_W, grad_b) add fixed blocks of kSmallLinearRowsPerBlock rows (within a block each
// lane's rows in order, then the lanes in order), then the blocks in order (block_sum.h): the
// same bits for any thread count.

#include <cstdint>

#include "kernels/common/activation.h"

namespace memscript::kernels {

struct SmallLinearShape {
  int64_t rows;
  int64_t in;
  int64_t out;
};

constexpr int64_t kSmallLinearRowsPerBlock = 256;
// Above this many weights a BLAS product is faster.
constexpr int64_t kSmallLinearMaxWeights = 1024;

inline int64_t small_linear_blocks(SmallLinearShape shape) {
  return (shape.rows + kSmallLinearRowsPerBlock - 1) / kSmallLinearRowsPerBlock;
}

// Rows [begin, end) of y = activation(x Wᵀ + b), and of the pre-activation x Wᵀ + b when `pre`
// is not null. bias may be null.
void small_linear_forward_cpu(const float* x, const float* weight, const float* bias,
                              ActivationKind activation, float* pre, float* y,
                              SmallLinearShape shape, int64_t begin, int64_t end);
void small_linear_forward_cpu(const double* x, const double* weight, const double* bias,
                              ActivationKind activation, double* pre, double* y,
                              SmallLinearShape shape, int64_t begin, int64_t end);

// Rows [begin, end) of grad_x.
void small_linear_grad_input_cpu(const float* grad_y, const float* weight, float* grad_x,
                                 SmallLinearShape shape, int64_t begin, int64_t end);
void small_linear_grad_input_cpu(const double* grad_y, const double* weight, double* grad_x,
                                 SmallLinearShape shape, int64_t begin, int64_t end);

// Blocks [begin, end): block b writes its [out, in] weight partial at
// weight_partials + b · out · in and its [out] bias partial at bias_partials + b · out (bias
// partials may be null).
void small_linear_grad_params_cpu(const float* grad_y, const float* x, float* weight_partials,
                                  float* bias_partials, SmallLinearShape shape, int64_t begin,
                                  int64_t end);
void small_linear_grad_params_cpu(const double* grad_y, const double* x, double* weight_partials,
                                  double* bias_partials, SmallLinearShape shape, int64_t begin,
                                  int64_t end);

}  // namespace memscript::kernels
