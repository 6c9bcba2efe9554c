#pragma once

// The delta rule of deltanet and gated_deltanet, per batch element and head:
//
//   S_t = α_t S_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,   o_t = S_t q_t
//
// and its additive member (StateUpdate::additive: retnet, flash-linear-attention's simple GLA),
// which writes without erasing what k_t held: S_t = α_t S_{t-1} + β_t v_t k_tᵀ. α is one number
// per head and token, or one per key column (gated linear attention: S_{t-1} diag(α_t)).
//
// delta_rule() runs the kernels of kernels/delta_rule/ as one autograd op where they take the
// tensors (ops::kernels_take) and delta_rule_reference() otherwise; the reference, token by token
// in libtorch ops, is also the oracle of the tests.

#include "runtime/torch.h"

namespace memscript::ops {

enum class StateUpdate { delta, additive };

struct DeltaRuleResult {
  torch::Tensor outputs;  // o_t = S_t q_t: [batch, heads, length, dv]
  torch::Tensor state;    // S after the last token: [batch, heads, dv, dk]
};

// q, k [batch, heads, length, dk]; v [batch, heads, length, dv]; beta [batch, heads, length];
// alpha shaped as beta, or as k (a decay per key column), or undefined (no decay); state
// [batch, heads, dv, dk] or undefined (zero).
// Views are read in place as long as their last dimension is contiguous. The outputs are a
// [batch, heads, length, dv] view of a [batch, length, heads, dv] tensor, so merging the heads
// afterwards copies nothing. Without gradients only the running state is kept.
DeltaRuleResult delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& beta, const torch::Tensor& alpha,
                           const torch::Tensor& state, StateUpdate update = StateUpdate::delta);

// The same in composed libtorch ops, token by token (impl = "reference").
DeltaRuleResult delta_rule_reference(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& beta,
                                     const torch::Tensor& alpha, const torch::Tensor& state,
                                     StateUpdate update = StateUpdate::delta);

// One step: state [batch, heads, dv, dk]; k [batch, heads, dk]; v [batch, heads, dv]; beta
// [batch, heads]; alpha [batch, heads] or [batch, heads, dk] (undefined: 1). Returns S_t.
torch::Tensor delta_rule_step(const torch::Tensor& state, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& beta,
                              const torch::Tensor& alpha = {},
                              StateUpdate update = StateUpdate::delta);

// Tokens between the checkpoints the forward keeps for the backward: about √length, which
// balances the checkpoints (length / K states) against the backward's segment (K states).
int64_t delta_rule_checkpoint_every(int64_t length);

}  // namespace memscript::ops
