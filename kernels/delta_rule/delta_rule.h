#pragma once

// The delta rule of deltanet and gated_deltanet, per batch element and head:
//
//   S_t = α_t S_{t-1} + β_t (v_t − α_t S_{t-1} k_t) k_tᵀ,   o_t = S_t q_t
//
// and, with `erase` off, the additive member of the same family (retnet; "simple GLA" in
// flash-linear-attention), which writes without first reading what the key holds:
//
//   S_t = α_t S_{t-1} + β_t v_t k_tᵀ
//
// S is [dv, dk] (values x keys); α = 1 when no decay is given. α is one number per head and
// token, or with `key_decay` one per key column (gated linear attention's gate, HGRN2's forget
// gate): the decayed state is then S_{t-1} diag(α_t), and each row decays as s_j ← α_j s_j. Each
// step is written once, for a number type N: one number (CUDA) or a vector of lanes on the CPU,
// one head per lane (small states) or one row of a head per lane (large states), so every path
// evaluates the same expressions in the same order. Written row by row, row i of S only ever sees
// v_t[i]: s_i ← α s_i + β (v_i − α s_i·k) k. So the forward runs one row per thread (CUDA) or per
// lane. The backward sums over rows into the gradients of q, k, β and α; to keep those sums in one
// fixed order (bit-identical whatever the thread count) the CPU runs one head per thread and adds
// the rows in order, and the CUDA kernel one head per block, each sum added in row order by one
// thread.
//
// Memory. The backward needs S_{t-1} and S_t at every step. Storing all of them costs
// L·dv·dk per head (L = 16384, d = 16: 16 MiB per head in float). Inverting the step instead
// divides by α and by (1 − β‖k‖²), which is 0 for β = 1, so instead the forward stores S every
// K tokens (checkpoints, ⌈L/K⌉·dv·dk per head) and the backward recomputes the K states of
// one segment at a time into a workspace of (K + 1)·dv·dk per head. With K ≈ √L both terms
// are √L·dv·dk, and the recompute costs one extra forward. Without gradients the forward
// stores no checkpoint: it keeps only the running S (dv·dk per head), held in state_out.

#include <cstdint>

#include "kernels/common/cuda_device.h"
#include "kernels/common/fixed_dims.h"
#include "kernels/common/sequence_view.h"
#include "kernels/common/storage_type.h"

namespace memscript::kernels {

struct DeltaRuleShape {
  int64_t batch;
  int64_t heads;
  int64_t length;
  int64_t key_dim;
  int64_t value_dim;
  int64_t checkpoint_every;  // K above, ≥ 1
  bool erase = true;         // false: the additive update (compiled separately: Erase below)
  bool key_decay = false;    // α per key column, [.., dk] (compiled separately: KeyDecay below)

  MS_HOST_DEVICE int64_t head_count() const { return batch * heads; }
  MS_HOST_DEVICE int64_t row_count() const { return batch * heads * value_dim; }
  MS_HOST_DEVICE int64_t matrix_size() const { return key_dim * value_dim; }
  MS_HOST_DEVICE int64_t checkpoint_count() const {
    return (length + checkpoint_every - 1) / checkpoint_every;
  }
  MS_HOST_DEVICE int64_t decay_width() const { return key_decay ? key_dim : 1; }
  // Acc elements of backward workspace one head needs: the state gradient, the states of one
  // segment, and the gradients of q_t, k_t and a key decay being summed over rows.
  MS_HOST_DEVICE int64_t workspace_per_head() const {
    return (checkpoint_every + 2) * matrix_size() + 3 * key_dim;
  }
};

// q, k: [.., dk]; v, outputs: [.., dv]; beta: width 1; alpha: width shape.decay_width(). States are
// Acc and contiguous: state_in / state_out [batch, heads, dv, dk], checkpoints [batch, heads,
// checkpoint_count, dv, dk] (checkpoint c is the state before token c·K).
template <typename T>
struct DeltaRuleForward {
  using Acc = AccumulatorOf<T>;
  SequenceView<const T> q, k, v, beta, alpha;  // alpha.data null: no decay
  const Acc* state_in;                         // null: start from zero
  SequenceView<T> outputs;
  Acc* state_out;    // the final state; the running state while the forward runs
  Acc* checkpoints;  // null: no backward will follow
  DeltaRuleShape shape;
};

template <typename T>
struct DeltaRuleBackward {
  using Acc = AccumulatorOf<T>;
  SequenceView<const T> q, k, v, beta, alpha;
  const Acc* checkpoints;
  SequenceView<const T> grad_outputs;  // null: the outputs were not used
  const Acc* grad_state_out;           // null: the final state was not used
  SequenceView<T> grad_q, grad_k, grad_v, grad_beta, grad_alpha;  // grad_alpha null iff alpha is
  Acc* grad_state_in;                                             // null: not wanted
  Acc* workspace;  // shape.workspace_per_head() per head
  DeltaRuleShape shape;
};

// k_j (or q_j) of a step as one number, loaded from the input. The CPU's lanes pass columns
// already gathered (LaneColumns in delta_rule_cpu.cpp).
template <typename T>
struct LoadedRow {
  const T* data;
  MS_HOST_DEVICE AccumulatorOf<T> operator()(int64_t j) const { return load(data[j]); }
};

// α_j of a step where one α decays the whole state: the same number for every key column.
template <typename N>
struct UniformDecay {
  N value;
  MS_HOST_DEVICE N operator()(int64_t) const { return value; }
};

// Where the backward adds α's gradient: one sum (UniformDecay), or one per key column.
template <typename N>
struct UniformDecayGrad {
  N& sum;
  MS_HOST_DEVICE void add(int64_t, N x) const { sum += x; }
};
template <typename N>
struct KeyDecayGrad {
  N* sums;
  MS_HOST_DEVICE void add(int64_t j, N x) const { sums[j] += x; }
};

// One token on one row of S: s_j ← α_j s_j, then s ← s + β (v − s·k) k, or s ← s + β v k
// without Erase. `alpha(j)` is α_j (UniformDecay, or the key decay's column j).
template <bool Erase, typename N, typename Key, typename Decay>
MS_HOST_DEVICE MS_INLINE void delta_rule_row_step(N* s, const Key& k, N value, N beta,
                                                  const Decay& alpha, int64_t key_dim) {
  N recalled{};
  for (int64_t j = 0; j < key_dim; ++j) {
    s[j] *= alpha(j);
    if constexpr (Erase) recalled += s[j] * k(j);
  }
  const N correction = Erase ? beta * (value - recalled) : beta * value;
  for (int64_t j = 0; j < key_dim; ++j) s[j] += correction * k(j);
}

// o_t[i] = s·q for one row s of S_t.
template <typename N, typename Query>
MS_HOST_DEVICE MS_INLINE N delta_rule_row_output(const N* s, const Query& q, int64_t key_dim) {
  N output{};
  for (int64_t j = 0; j < key_dim; ++j) output += s[j] * q(j);
  return output;
}

// The backward of one token on one row i of S, given the row before (S_{t-1}) and after (S_t)
// the step: adds the output's gradient into ds_i (the gradient of S_t's row), adds the row's
// terms to ∂q_t, ∂k_t, ∂β_t and ∂α_t, leaves ds_i holding the gradient of S_{t-1}'s row, and
// returns ∂v_t[i]. The recalled sum is the forward's, so that the error below is the forward's.
// `grad_alpha.add(j, x)` takes α_j's terms (UniformDecayGrad or KeyDecayGrad). The five arrays
// never overlap (restrict: the loops over j vectorize without alias checks).
template <bool Erase, typename N, typename Vec, typename Decay, typename DecayGrad>
MS_HOST_DEVICE MS_INLINE N delta_rule_row_backward(
    N* __restrict__ dsi, const N* __restrict__ before, const N* __restrict__ after, const Vec& q,
    const Vec& k, N value, N grad_output, N beta, const Decay& alpha, int64_t key_dim,
    N* __restrict__ grad_q, N* __restrict__ grad_k, N& grad_beta, const DecayGrad& grad_alpha) {
  N recalled{}, ds_k{};
  for (int64_t j = 0; j < key_dim; ++j) {
    dsi[j] += grad_output * q(j);
    grad_q[j] += grad_output * after[j];
    if constexpr (Erase) recalled += (alpha(j) * before[j]) * k(j);
    ds_k += dsi[j] * k(j);
  }
  const N error = Erase ? value - recalled : value;
  const N grad_error = beta * ds_k;
  grad_beta += ds_k * error;
  for (int64_t j = 0; j < key_dim; ++j) {
    if constexpr (Erase) {
      grad_k[j] += beta * error * dsi[j] - grad_error * (alpha(j) * before[j]);
      const N grad_decayed = dsi[j] - grad_error * k(j);
      grad_alpha.add(j, grad_decayed * before[j]);
      dsi[j] = alpha(j) * grad_decayed;
    } else {
      grad_k[j] += beta * error * dsi[j];
      grad_alpha.add(j, dsi[j] * before[j]);
      dsi[j] = alpha(j) * dsi[j];
    }
  }
  return grad_error;
}

// Calls f.template operator()<Erase, KeyDecay>() with the shape's update and decay compiled in.
template <typename F>
inline void with_update(const DeltaRuleShape& shape, F&& f) {
  if (shape.key_decay) {
    if (shape.erase) return f.template operator()<true, true>();
    return f.template operator()<false, true>();
  }
  if (shape.erase) return f.template operator()<true, false>();
  f.template operator()<false, false>();
}

// α of token t of a head as the step bodies read it: the key decay's row, or one number
// (1 without decay).
template <bool KeyDecay, typename T>
MS_HOST_DEVICE inline auto decay_at(const SequenceView<const T>& alpha, int64_t b, int64_t h,
                                    int64_t t) {
  if constexpr (KeyDecay) {
    return LoadedRow<T>{alpha.at(b, h, t)};
  } else {
    using Acc = AccumulatorOf<T>;
    return UniformDecay<Acc>{alpha ? load(*alpha.at(b, h, t)) : Acc(1)};
  }
}

// The forward of one row of one head: `row` indexes (batch, head, row of S) flattened.
template <bool Erase, bool KeyDecay, typename T, int64_t KeyDim = 0>
MS_HOST_DEVICE inline void delta_rule_forward_row(const DeltaRuleForward<T>& p, int64_t row) {
  using Acc = AccumulatorOf<T>;
  const DeltaRuleShape& shape = p.shape;
  const int64_t i = row % shape.value_dim, head_index = row / shape.value_dim;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = dim_of<KeyDim>(shape.key_dim);
  const int64_t offset = head_index * shape.matrix_size() + i * dk;
  Acc* s = p.state_out + offset;
  for (int64_t j = 0; j < dk; ++j) s[j] = p.state_in ? p.state_in[offset + j] : Acc(0);
  for (int64_t t = 0; t < shape.length; ++t) {
    if (p.checkpoints && t % shape.checkpoint_every == 0) {
      Acc* saved = p.checkpoints +
                   (head_index * shape.checkpoint_count() + t / shape.checkpoint_every) *
                       shape.matrix_size() +
                   i * dk;
      for (int64_t j = 0; j < dk; ++j) saved[j] = s[j];
    }
    delta_rule_row_step<Erase>(s, LoadedRow<T>{p.k.at(b, h, t)}, load(p.v.at(b, h, t)[i]),
                               load(*p.beta.at(b, h, t)), decay_at<KeyDecay>(p.alpha, b, h, t), dk);
    store(delta_rule_row_output(s, LoadedRow<T>{p.q.at(b, h, t)}, dk), p.outputs.at(b, h, t) + i);
  }
}

// Recomputes the states of tokens [start, end) of one head from the checkpoint before `start`:
// states[0] is that checkpoint, states[n + 1] the state after token start + n.
template <bool Erase, bool KeyDecay, typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void delta_rule_recompute_segment(const DeltaRuleBackward<T>& p, int64_t b,
                                                        int64_t h, int64_t start, int64_t end,
                                                        AccumulatorOf<T>* states) {
  const DeltaRuleShape& shape = p.shape;
  const int64_t dk = dim_of<KeyDim>(shape.key_dim), dv = dim_of<ValueDim>(shape.value_dim);
  const int64_t matrix = dk * dv;
  const int64_t head_index = b * shape.heads + h;
  const auto* checkpoint =
      p.checkpoints +
      (head_index * shape.checkpoint_count() + start / shape.checkpoint_every) * matrix;
  for (int64_t n = 0; n < matrix; ++n) states[n] = checkpoint[n];
  for (int64_t t = start; t < end; ++t) {
    auto* next = states + (t - start + 1) * matrix;
    for (int64_t n = 0; n < matrix; ++n) next[n] = next[n - matrix];
    const T* v = p.v.at(b, h, t);
    for (int64_t i = 0; i < dv; ++i) {
      delta_rule_row_step<Erase>(next + i * dk, LoadedRow<T>{p.k.at(b, h, t)}, load(v[i]),
                                 load(*p.beta.at(b, h, t)), decay_at<KeyDecay>(p.alpha, b, h, t),
                                 dk);
    }
  }
}

// The backward of token t of one head, given S_{t-1} (prev) and S_t (cur): adds the output's
// gradient into the state gradient ds, writes the gradients of q_t, k_t, v_t, β_t, α_t, and
// leaves ds holding the gradient with respect to S_{t-1}. Rows are summed in order 0, 1, ...
// grad_q, grad_k and grad_alpha are dk each.
template <bool Erase, bool KeyDecay, typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void delta_rule_backward_token(
    const DeltaRuleBackward<T>& p, int64_t b, int64_t h, int64_t t, const AccumulatorOf<T>* prev,
    const AccumulatorOf<T>* cur, AccumulatorOf<T>* ds, AccumulatorOf<T>* grad_q,
    AccumulatorOf<T>* grad_k, AccumulatorOf<T>* grad_alpha) {
  using Acc = AccumulatorOf<T>;
  const int64_t dk = dim_of<KeyDim>(p.shape.key_dim), dv = dim_of<ValueDim>(p.shape.value_dim);
  const LoadedRow<T> q{p.q.at(b, h, t)}, k{p.k.at(b, h, t)};
  const T* v = p.v.at(b, h, t);
  const Acc beta = load(*p.beta.at(b, h, t));
  const auto alpha = decay_at<KeyDecay>(p.alpha, b, h, t);
  for (int64_t j = 0; j < dk; ++j) grad_q[j] = grad_k[j] = grad_alpha[j] = 0;
  // The uniform α's sum stays in a local: a sum in the workspace could alias the rows, and the
  // compiler would then neither keep it in a register nor vectorize the loops over j.
  Acc grad_beta = 0, grad_uniform_alpha = 0;
  for (int64_t i = 0; i < dv; ++i) {
    const Acc grad_output = p.grad_outputs ? load(p.grad_outputs.at(b, h, t)[i]) : Acc(0);
    Acc grad_v;
    if constexpr (KeyDecay) {
      grad_v = delta_rule_row_backward<Erase>(ds + i * dk, prev + i * dk, cur + i * dk, q, k,
                                              load(v[i]), grad_output, beta, alpha, dk, grad_q,
                                              grad_k, grad_beta, KeyDecayGrad<Acc>{grad_alpha});
    } else {
      grad_v = delta_rule_row_backward<Erase>(
          ds + i * dk, prev + i * dk, cur + i * dk, q, k, load(v[i]), grad_output, beta, alpha, dk,
          grad_q, grad_k, grad_beta, UniformDecayGrad<Acc>{grad_uniform_alpha});
    }
    store(grad_v, p.grad_v.at(b, h, t) + i);
  }
  if constexpr (!KeyDecay) grad_alpha[0] = grad_uniform_alpha;
  for (int64_t j = 0; j < dk; ++j) {
    store(grad_q[j], p.grad_q.at(b, h, t) + j);
    store(grad_k[j], p.grad_k.at(b, h, t) + j);
  }
  store(grad_beta, p.grad_beta.at(b, h, t));
  if (p.grad_alpha) {
    for (int64_t j = 0; j < p.shape.decay_width(); ++j)
      store(grad_alpha[j], p.grad_alpha.at(b, h, t) + j);
  }
}

// The backward of one head: segments from last to first, tokens from last to first.
template <bool Erase, bool KeyDecay, typename T, int64_t KeyDim = 0, int64_t ValueDim = 0>
MS_HOST_DEVICE inline void delta_rule_backward_head(const DeltaRuleBackward<T>& p,
                                                    int64_t head_index) {
  using Acc = AccumulatorOf<T>;
  const DeltaRuleShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t matrix = dim_of<KeyDim>(shape.key_dim) * dim_of<ValueDim>(shape.value_dim);
  const int64_t every = shape.checkpoint_every;
  Acc* ds = p.workspace + head_index * shape.workspace_per_head();
  Acc* states = ds + matrix;
  Acc* grad_q = states + (every + 1) * matrix;
  Acc* grad_k = grad_q + shape.key_dim;
  Acc* grad_alpha = grad_k + shape.key_dim;
  for (int64_t n = 0; n < matrix; ++n)
    ds[n] = p.grad_state_out ? p.grad_state_out[head_index * matrix + n] : Acc(0);
  for (int64_t segment = shape.checkpoint_count() - 1; segment >= 0; --segment) {
    const int64_t start = segment * every;
    const int64_t end = start + every < shape.length ? start + every : shape.length;
    delta_rule_recompute_segment<Erase, KeyDecay, T, KeyDim, ValueDim>(p, b, h, start, end, states);
    for (int64_t t = end - 1; t >= start; --t) {
      const Acc* prev = states + (t - start) * matrix;
      delta_rule_backward_token<Erase, KeyDecay, T, KeyDim, ValueDim>(
          p, b, h, t, prev, prev + matrix, ds, grad_q, grad_k, grad_alpha);
    }
  }
  if (p.grad_state_in) {
    for (int64_t n = 0; n < matrix; ++n) p.grad_state_in[head_index * matrix + n] = ds[n];
  }
}

// The CUDA forward's per-thread body: which row a (block, thread) pair owns. Here so the tests
// can run it on the CPU over blocks x threads. (The CUDA backward, in delta_rule_cuda.cu,
// gives each head a block and spreads delta_rule_backward_token's rows over its threads.)
constexpr int64_t kDeltaRuleThreadsPerBlock = 128;

template <bool Erase, bool KeyDecay, typename T>
MS_HOST_DEVICE inline void delta_rule_forward_thread(const DeltaRuleForward<T>& p, int64_t block,
                                                     int64_t thread, int64_t threads_per_block) {
  const int64_t row = block * threads_per_block + thread;
  if (row < p.shape.row_count()) delta_rule_forward_row<Erase, KeyDecay>(p, row);
}

inline int64_t delta_rule_blocks(int64_t threads) {
  return (threads + kDeltaRuleThreadsPerBlock - 1) / kDeltaRuleThreadsPerBlock;
}

// CPU: heads [begin, end) of shape.head_count(); the caller splits the range across its thread
// pool. Heads with small states (the study's 4 x 4) step together, one per vector lane; a large
// state's rows step sixteen at a time, one per lane. Each lane evaluates the bodies above in the
// same order, so the bits are those of one head (or row) at a time, and of the CUDA kernels.
void delta_rule_forward_cpu(const DeltaRuleForward<float>& p, int64_t begin, int64_t end);
void delta_rule_forward_cpu(const DeltaRuleForward<double>& p, int64_t begin, int64_t end);
void delta_rule_backward_cpu(const DeltaRuleBackward<float>& p, int64_t begin, int64_t end);
void delta_rule_backward_cpu(const DeltaRuleBackward<double>& p, int64_t begin, int64_t end);

// CUDA, float32 or bf16 (kernels/common/cuda_device.h says what a launcher takes and returns).
MEMSCRIPT_CUDA_LAUNCHER(delta_rule_forward_cuda, const DeltaRuleForward<float>&);
MEMSCRIPT_CUDA_LAUNCHER(delta_rule_forward_cuda, const DeltaRuleForward<Bf16>&);
MEMSCRIPT_CUDA_LAUNCHER(delta_rule_backward_cuda, const DeltaRuleBackward<float>&);
MEMSCRIPT_CUDA_LAUNCHER(delta_rule_backward_cuda, const DeltaRuleBackward<Bf16>&);

}  // namespace memscript::kernels
