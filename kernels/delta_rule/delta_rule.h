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
  // The end of the checkpoint segment that starts at token `start`.
  MS_HOST_DEVICE int64_t segment_end(int64_t start) const {
    return start + checkpoint_every < length ? start + checkpoint_every : length;
  }
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
  int64_t stride = 1;  // sum j at sums[j · stride]
  MS_HOST_DEVICE void add(int64_t j, N x) const { sums[j * stride] += x; }
};

// The row bodies below find element j of a row at j · stride: 1 where a row is contiguous (the
// CPU), the number of rows where rows are interleaved (the CUDA backward's workspace, whose
// warps then read consecutive addresses). The bodies are inlined, so a stride of 1 costs
// nothing.

// One token on one row of S: s_j ← α_j s_j, then s ← s + β (v − s·k) k, or s ← s + β v k
// without Erase. `alpha(j)` is α_j (UniformDecay, or the key decay's column j).
template <bool Erase, typename N, typename Key, typename Decay>
MS_HOST_DEVICE MS_INLINE void delta_rule_row_step(N* s, const Key& k, N value, N beta,
                                                  const Decay& alpha, int64_t key_dim,
                                                  int64_t stride = 1) {
  N recalled{};
  for (int64_t j = 0; j < key_dim; ++j) {
    s[j * stride] *= alpha(j);
    if constexpr (Erase) recalled += s[j * stride] * k(j);
  }
  const N correction = Erase ? beta * (value - recalled) : beta * value;
  for (int64_t j = 0; j < key_dim; ++j) s[j * stride] += correction * k(j);
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
// never overlap (restrict: the loops over j vectorize without alias checks). dsi, before and
// after hold element j at j · row_stride; grad_q and grad_k at j · grad_stride.
template <bool Erase, typename N, typename Vec, typename Decay, typename DecayGrad>
MS_HOST_DEVICE MS_INLINE N delta_rule_row_backward(
    N* __restrict__ dsi, const N* __restrict__ before, const N* __restrict__ after, const Vec& q,
    const Vec& k, N value, N grad_output, N beta, const Decay& alpha, int64_t key_dim,
    N* __restrict__ grad_q, N* __restrict__ grad_k, N& grad_beta, const DecayGrad& grad_alpha,
    int64_t row_stride = 1, int64_t grad_stride = 1) {
  N recalled{}, ds_k{};
  for (int64_t j = 0; j < key_dim; ++j) {
    const int64_t r = j * row_stride;
    dsi[r] += grad_output * q(j);
    grad_q[j * grad_stride] += grad_output * after[r];
    if constexpr (Erase) recalled += (alpha(j) * before[r]) * k(j);
    ds_k += dsi[r] * k(j);
  }
  const N error = Erase ? value - recalled : value;
  const N grad_error = beta * ds_k;
  grad_beta += ds_k * error;
  for (int64_t j = 0; j < key_dim; ++j) {
    const int64_t r = j * row_stride;
    if constexpr (Erase) {
      grad_k[j * grad_stride] += beta * error * dsi[r] - grad_error * (alpha(j) * before[r]);
      const N grad_decayed = dsi[r] - grad_error * k(j);
      grad_alpha.add(j, grad_decayed * before[r]);
      dsi[r] = alpha(j) * grad_decayed;
    } else {
      grad_k[j * grad_stride] += beta * error * dsi[r];
      grad_alpha.add(j, dsi[r] * before[r]);
      dsi[r] = alpha(j) * dsi[r];
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
  // With the key size fixed, the running row is a local array: registers, or local memory,
  // which the GPU lays out so that a warp's threads touch consecutive addresses. Otherwise it
  // runs in state_out, where the next row (the next thread's) is dk numbers away.
  Acc local[KeyDim > 0 ? KeyDim : 1];
  Acc* s = KeyDim > 0 ? local : p.state_out + offset;
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
  if constexpr (KeyDim > 0) {
    for (int64_t j = 0; j < dk; ++j) p.state_out[offset + j] = s[j];
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
    const int64_t start = segment * every, end = shape.segment_end(start);
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
// can run it on the CPU over blocks x threads.
constexpr int64_t kDeltaRuleThreadsPerBlock = 128;

template <bool Erase, bool KeyDecay, typename T, int64_t KeyDim = 0>
MS_HOST_DEVICE inline void delta_rule_forward_thread(const DeltaRuleForward<T>& p, int64_t block,
                                                     int64_t thread, int64_t threads_per_block) {
  const int64_t row = block * threads_per_block + thread;
  if (row < p.shape.row_count()) delta_rule_forward_row<Erase, KeyDecay, T, KeyDim>(p, row);
}

inline int64_t delta_rule_blocks(int64_t threads) {
  return (threads + kDeltaRuleThreadsPerBlock - 1) / kDeltaRuleThreadsPerBlock;
}

// The CUDA backward: one head per block, row i of S on thread i (and i + threads, …). Rows
// recompute their own states (a row's step needs no other row); the sums over rows into ∂q_t,
// ∂k_t, ∂β_t, ∂α_t go through shared memory, each added in row order 0, 1, … by one thread, so
// the result does not depend on the block size. The phases below run between the block's
// barriers (delta_rule_cuda.cu); the tests run them on the CPU, thread after thread.
//
// Layout. The head's workspace holds ∂S and the segment's states with the rows interleaved,
// element (i, j) at j·dv + i: at every j a warp's threads (consecutive rows) touch consecutive
// addresses. Shared memory holds each row's terms of ∂q_t and ∂k_t (and of a key decay's ∂α_t)
// as [dk][dv + 1], (i, j) at j·(dv + 1) + i: consecutive rows write consecutive banks, and in
// the column sums, where thread j reads column j, the extra element puts each column's start in
// another bank. Checkpoints and the state gradients handed in and out stay [dv, dk].
struct DeltaRuleBlockShared {
  int64_t stride;  // dv + 1
  int64_t grad_alpha_size;

  MS_HOST_DEVICE explicit DeltaRuleBlockShared(const DeltaRuleShape& shape)
      : stride(shape.value_dim + 1),
        grad_alpha_size(shape.key_decay ? shape.key_dim * stride : shape.value_dim) {}
  // Acc elements: the terms of ∂q_t, ∂k_t, ∂α_t, ∂β_t.
  MS_HOST_DEVICE int64_t size(const DeltaRuleShape& shape) const {
    return 2 * shape.key_dim * stride + grad_alpha_size + shape.value_dim;
  }
};

template <typename Acc>
struct DeltaRuleBlockTerms {
  Acc *grad_q, *grad_k, *grad_alpha, *grad_beta;

  MS_HOST_DEVICE DeltaRuleBlockTerms(Acc* shared, const DeltaRuleShape& shape,
                                     const DeltaRuleBlockShared& layout)
      : grad_q(shared),
        grad_k(grad_q + shape.key_dim * layout.stride),
        grad_alpha(grad_k + shape.key_dim * layout.stride),
        grad_beta(grad_alpha + layout.grad_alpha_size) {}
};

// Before the first segment: ∂S from the gradient of the final state (or 0), interleaved.
template <typename T>
MS_HOST_DEVICE inline void delta_rule_block_start(const DeltaRuleBackward<T>& p, int64_t head_index,
                                                  int64_t thread, int64_t threads) {
  using Acc = AccumulatorOf<T>;
  const DeltaRuleShape& shape = p.shape;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = shape.matrix_size();
  Acc* ds = p.workspace + head_index * shape.workspace_per_head();
  for (int64_t n = thread; n < matrix; n += threads) {
    const Acc x = p.grad_state_out ? p.grad_state_out[head_index * matrix + n] : Acc(0);
    ds[n % dk * dv + n / dk] = x;
  }
}

// The states of tokens [start, end) of the head, each thread its rows: states[0] the
// checkpoint before `start`, states[n + 1] the state after token start + n.
template <bool Erase, bool KeyDecay, typename T>
MS_HOST_DEVICE inline void delta_rule_block_recompute(const DeltaRuleBackward<T>& p,
                                                      int64_t head_index, int64_t segment,
                                                      int64_t thread, int64_t threads) {
  using Acc = AccumulatorOf<T>;
  const DeltaRuleShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = shape.matrix_size();
  const int64_t start = segment * shape.checkpoint_every, end = shape.segment_end(start);
  Acc* states = p.workspace + head_index * shape.workspace_per_head() + matrix;
  const Acc* checkpoint =
      p.checkpoints + (head_index * shape.checkpoint_count() + segment) * matrix;
  for (int64_t i = thread; i < dv; i += threads) {
    for (int64_t j = 0; j < dk; ++j) states[j * dv + i] = checkpoint[i * dk + j];
    for (int64_t t = start; t < end; ++t) {
      Acc* next = states + (t - start + 1) * matrix + i;
      for (int64_t j = 0; j < dk; ++j) next[j * dv] = next[j * dv - matrix];
      delta_rule_row_step<Erase>(next, LoadedRow<T>{p.k.at(b, h, t)}, load(p.v.at(b, h, t)[i]),
                                 load(*p.beta.at(b, h, t)), decay_at<KeyDecay>(p.alpha, b, h, t),
                                 dk, dv);
    }
  }
}

// Token t (in the segment starting at `start`) on each of the thread's rows: ∂v_t[i], ∂S's row
// carried back one token, and the row's terms of the other gradients into shared memory.
template <bool Erase, bool KeyDecay, typename T>
MS_HOST_DEVICE inline void delta_rule_block_rows(const DeltaRuleBackward<T>& p, int64_t head_index,
                                                 int64_t start, int64_t t, int64_t thread,
                                                 int64_t threads, AccumulatorOf<T>* shared) {
  using Acc = AccumulatorOf<T>;
  const DeltaRuleShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = shape.matrix_size();
  const DeltaRuleBlockShared layout(shape);
  const DeltaRuleBlockTerms<Acc> terms(shared, shape, layout);
  const int64_t stride = layout.stride;
  Acc* ds = p.workspace + head_index * shape.workspace_per_head();
  const Acc* before_segment = ds + matrix + (t - start) * matrix;
  const LoadedRow<T> q{p.q.at(b, h, t)}, k{p.k.at(b, h, t)};
  const Acc beta = load(*p.beta.at(b, h, t));
  const auto alpha = decay_at<KeyDecay>(p.alpha, b, h, t);
  for (int64_t i = thread; i < dv; i += threads) {
    const Acc* before = before_segment + i;
    const Acc grad_output = p.grad_outputs ? load(p.grad_outputs.at(b, h, t)[i]) : Acc(0);
    for (int64_t j = 0; j < dk; ++j)
      terms.grad_q[j * stride + i] = terms.grad_k[j * stride + i] = 0;
    terms.grad_beta[i] = 0;
    Acc grad_v;
    if constexpr (KeyDecay) {
      for (int64_t j = 0; j < dk; ++j) terms.grad_alpha[j * stride + i] = 0;
      grad_v = delta_rule_row_backward<Erase>(
          ds + i, before, before + matrix, q, k, load(p.v.at(b, h, t)[i]), grad_output, beta, alpha,
          dk, terms.grad_q + i, terms.grad_k + i, terms.grad_beta[i],
          KeyDecayGrad<Acc>{terms.grad_alpha + i, stride}, dv, stride);
    } else {
      terms.grad_alpha[i] = 0;
      grad_v = delta_rule_row_backward<Erase>(
          ds + i, before, before + matrix, q, k, load(p.v.at(b, h, t)[i]), grad_output, beta, alpha,
          dk, terms.grad_q + i, terms.grad_k + i, terms.grad_beta[i],
          UniformDecayGrad<Acc>{terms.grad_alpha[i]}, dv, stride);
    }
    store(grad_v, p.grad_v.at(b, h, t) + i);
  }
}

// Token t's sums over rows, each in row order: thread j the columns j of ∂q_t, ∂k_t (and a key
// decay's ∂α_t); thread 0 also ∂β_t and a uniform ∂α_t.
template <bool KeyDecay, typename T>
MS_HOST_DEVICE inline void delta_rule_block_columns(const DeltaRuleBackward<T>& p,
                                                    int64_t head_index, int64_t t, int64_t thread,
                                                    int64_t threads,
                                                    const AccumulatorOf<T>* shared) {
  using Acc = AccumulatorOf<T>;
  const DeltaRuleShape& shape = p.shape;
  const int64_t b = head_index / shape.heads, h = head_index % shape.heads;
  const int64_t dk = shape.key_dim, dv = shape.value_dim;
  const DeltaRuleBlockShared layout(shape);
  const DeltaRuleBlockTerms<const Acc> terms(shared, shape, layout);
  for (int64_t j = thread; j < dk; j += threads) {
    const Acc* column_q = terms.grad_q + j * layout.stride;
    const Acc* column_k = terms.grad_k + j * layout.stride;
    Acc grad_q = 0, grad_k = 0;
    for (int64_t i = 0; i < dv; ++i) {
      grad_q += column_q[i];
      grad_k += column_k[i];
    }
    store(grad_q, p.grad_q.at(b, h, t) + j);
    store(grad_k, p.grad_k.at(b, h, t) + j);
    if constexpr (KeyDecay) {
      const Acc* column_alpha = terms.grad_alpha + j * layout.stride;
      Acc grad_alpha = 0;
      for (int64_t i = 0; i < dv; ++i) grad_alpha += column_alpha[i];
      store(grad_alpha, p.grad_alpha.at(b, h, t) + j);
    }
  }
  if (thread == 0) {
    Acc grad_beta = 0, grad_alpha = 0;
    for (int64_t i = 0; i < dv; ++i) {
      grad_beta += terms.grad_beta[i];
      if constexpr (!KeyDecay) grad_alpha += terms.grad_alpha[i];
    }
    store(grad_beta, p.grad_beta.at(b, h, t));
    if (!KeyDecay && p.grad_alpha) store(grad_alpha, p.grad_alpha.at(b, h, t));
  }
}

// After the first segment: the gradient of the initial state, [dv, dk] again.
template <typename T>
MS_HOST_DEVICE inline void delta_rule_block_finish(const DeltaRuleBackward<T>& p,
                                                   int64_t head_index, int64_t thread,
                                                   int64_t threads) {
  if (!p.grad_state_in) return;
  const DeltaRuleShape& shape = p.shape;
  const int64_t dk = shape.key_dim, dv = shape.value_dim, matrix = shape.matrix_size();
  const auto* ds = p.workspace + head_index * shape.workspace_per_head();
  for (int64_t n = thread; n < matrix; n += threads)
    p.grad_state_in[head_index * matrix + n] = ds[n % dk * dv + n / dk];
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
