#pragma once

// The delta rule (kernels/delta_rule.h) as an autograd op on tensors: the fused counterpart of
// delta_rule() in runtime/model/mixers/deltanet.h, with the same arguments and results.

#include "runtime/torch.h"

namespace memscript::fused {

struct DeltaRuleResult {
  torch::Tensor outputs;  // o_t = S_t q_t: [batch, heads, length, dv]
  torch::Tensor state;    // S after the last token: [batch, heads, dv, dk]
};

// q, k [batch, heads, length, dk]; v [batch, heads, length, dv]; beta, alpha [batch, heads,
// length] (alpha undefined: no decay); state [batch, heads, dv, dk] or undefined (zero).
// Views are read in place as long as their last dimension is contiguous. The outputs are a
// [batch, heads, length, dv] view of a [batch, length, heads, dv] tensor, so merging the heads
// afterwards copies nothing. Without gradients only the running state is kept.
DeltaRuleResult delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& beta, const torch::Tensor& alpha,
                           const torch::Tensor& state);

// Tokens between the checkpoints the forward keeps for the backward: about √length, which
// balances the checkpoints (length / K states) against the backward's segment (K states).
int64_t delta_rule_checkpoint_every(int64_t length);

}  // namespace memscript::fused
