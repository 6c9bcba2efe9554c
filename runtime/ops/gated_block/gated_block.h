#pragma once

#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/torch.h"

namespace memscript::ops {

// The projections around a gated cell: in [slots · hidden, d_model] with its bias (or
// undefined), qLSTM's forget bias [hidden] (or undefined), out [d_model, hidden] with its bias.
struct GatedProjections {
  torch::Tensor in_weight;
  torch::Tensor in_bias;
  torch::Tensor forget_bias;
  torch::Tensor out_weight;
  torch::Tensor out_bias;
};

struct GatedBlockResult {
  torch::Tensor y;     // [batch, length, d_model]
  torch::Tensor last;  // [batch, hidden]: the cell state after the last step
};

// y = W_out cell(W_in N(x) + b_in) + b_out with qLSTM's cell (pre-activation slots f, i, z,
// o) from c0 [batch, hidden] (undefined: zeros), as one autograd node through
// kernels/gated_block/gated_block.h where that kernel takes the tensors (a LayerNorm N, CPU
// float32 and float64, widths up to kernels::kGatedBlockMaxWidth), and otherwise composed from
// ops::pre_norm, ops::linear and ops::qlstm_cell, which compute the same function.
GatedBlockResult qlstm_block(const torch::Tensor& x, const PreNorm& norm,
                             const GatedProjections& projections, const torch::Tensor& c0,
                             bool negative_eigenvalues);

// The same with minGRU's cell (slots z, h̃) from h0.
GatedBlockResult mingru_block(const torch::Tensor& x, const PreNorm& norm,
                              const GatedProjections& projections, const torch::Tensor& h0,
                              bool negative_eigenvalues);

}  // namespace memscript::ops
