#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "kernels/common/lane_prefetch.h"
#include "kernels/common/row_tile.h"
#include "kernels/delta_rule/delta_rule.h"

namespace memscript::kernels {

namespace {

// Heads whose state has at most this many numbers step together, one head per vector lane: at
// the study's sizes (4 x 4) a row of the state is 4 numbers, too few for a vector register, and
// every sum over a row would be a chain of dependent additions. Each lane evaluates the CUDA
// bodies' expressions (delta_rule.h) in the same order, so the results are the same bits as one
// head at a time. Larger states keep the per-row loops of those bodies, which vectorize along
// the row.
constexpr int64_t kLanesMaxMatrix = 64;

// A group of heads (common/row_tile.h's LaneGroup) with each lane's batch element and head.
struct HeadGroup : LaneGroup {
  int64_t batch[kTileRows];
  int64_t head_in_batch[kTileRows];

  HeadGroup(const LaneGroup& group, int64_t heads) : LaneGroup(group) {
    for (int64_t l = 0; l < kTileRows; ++l) {
      batch[l] = item(l) / heads;
      head_in_batch[l] = item(l) % heads;
    }
  }
};

template <typename T>
LaneRows<T> rows_at(const SequenceView<T>& view, const HeadGroup& group, int64_t t) {
  LaneRows<T> at;
  for (int64_t l = 0; l < kTileRows; ++l)
    at.rows[l] = view.at(group.batch[l], group.head_in_batch[l], t);
  return at;
}

template <typename T>
void gather(const LaneRows<const T>& at, int64_t width, Lanes<T>* columns) {
  gather_lane_rows(at.rows, width, columns);
}

template <typename T>
void scatter(const Lanes<T>* columns, int64_t width, const HeadGroup& group,
             const LaneRows<T>& at) {
  scatter_lane_rows(columns, width, group.count, at.rows);
}

// k_j (or q_j, α_j) of every lane's head, gathered into columns: the step bodies' N is Lanes<T>.
template <typename T>
struct LaneColumns {
  const Lanes<T>* data;
  Lanes<T> operator()(int64_t j) const { return data[j]; }
};

// delta_rule.h's UniformDecay, UniformDecayGrad and KeyDecayGrad for lanes (a vector type
// as a class template's argument would lose its alignment attribute).
template <typename T>
struct UniformLaneDecay {
  Lanes<T> value;
  Lanes<T> operator()(int64_t) const { return value; }
};
template <typename T>
struct UniformLaneDecayGrad {
  Lanes<T>& sum;
  void add(int64_t, Lanes<T> x) const { sum += x; }
};
template <typename T>
struct KeyLaneDecayGrad {
  Lanes<T>* sums;
  void add(int64_t j, Lanes<T> x) const { sums[j] += x; }
};

// One step's inputs of every lane's head, as columns.
template <typename T>
struct StepInputs {
  int64_t dk, dv;
  Lanes<T>* q;           // [dk]
  Lanes<T>* k;           // [dk]
  Lanes<T>* v;           // [dv]
  Lanes<T>* key_decays;  // [dk]: α per key column (KeyDecay)
  Lanes<T> beta, alpha;

  // Reads the step's k, v, β and α (1 without decay); q only when asked.
  template <typename P>
  void read(const P& p, const HeadGroup& group, int64_t t, bool with_q) {
    gather(rows_at(p.k, group, t), dk, k);
    gather(rows_at(p.v, group, t), dv, v);
    if (with_q) gather(rows_at(p.q, group, t), dk, q);
    gather(rows_at(p.beta, group, t), 1, &beta);
    if (p.shape.key_decay) {
      gather(rows_at(p.alpha, group, t), dk, key_decays);
    } else if (p.alpha) {
      gather(rows_at(p.alpha, group, t), 1, &alpha);
    } else {
      alpha = broadcast<T>(T(1));
    }
  }
  // α as the step bodies read it.
  template <bool KeyDecay>
  auto decay() const {
    if constexpr (KeyDecay) {
      return LaneColumns<T>{key_decays};
    } else {
      return UniformLaneDecay<T>{alpha};
    }
  }
};

// The lines of one array's rows of a step, for every lane (lane_prefetch.h).
template <typename T>
struct ViewPrefetch {
  SequenceView<T> view;
  LanePrefetch lines;

  ViewPrefetch(const SequenceView<T>& view_, const HeadGroup& group, int64_t width) : view(view_) {
    if (!view) return;
    const LaneRows<T> at = rows_at(view, group, 0);
    const void* rows[kTileRows];
    std::copy(at.rows, at.rows + kTileRows, rows);
    lines = LanePrefetch(rows, width * int64_t(sizeof(T)), view.time_stride * int64_t(sizeof(T)));
  }
  [[gnu::always_inline]] void fetch(const HeadGroup& group, int64_t t) const {
    if (view) lines.fetch<!std::is_const_v<T>>(view.at(group.batch[0], group.head_in_batch[0], t));
  }
};

// How far ahead the forward asks for its inputs: a few steps' work covers a miss to memory.
constexpr int64_t kPrefetchAhead = 8;

// The inputs both passes read per step.
template <typename T>
struct InputPrefetch {
  ViewPrefetch<const T> q, k, v, beta, alpha;

  template <typename Pass>
  InputPrefetch(const Pass& p, const HeadGroup& g)
      : q(p.q, g, p.shape.key_dim),
        k(p.k, g, p.shape.key_dim),
        v(p.v, g, p.shape.value_dim),
        beta(p.beta, g, 1),
        alpha(p.alpha, g, p.shape.decay_width()) {}
  [[gnu::always_inline]] void fetch(const HeadGroup& g, int64_t t) const {
    q.fetch(g, t), k.fetch(g, t), v.fetch(g, t), beta.fetch(g, t), alpha.fetch(g, t);
  }
};

// Every array the forward reads or writes per step.
template <typename T>
struct ForwardPrefetch {
  InputPrefetch<T> inputs;
  ViewPrefetch<T> outputs;

  ForwardPrefetch(const DeltaRuleForward<T>& p, const HeadGroup& g)
      : inputs(p, g), outputs(p.outputs, g, p.shape.value_dim) {}
  [[gnu::always_inline]] void fetch(const HeadGroup& g, int64_t t) const {
    inputs.fetch(g, t), outputs.fetch(g, t);
  }
};

// Every array the backward reads or writes per step.
template <typename T>
struct BackwardPrefetch {
  InputPrefetch<T> inputs;
  ViewPrefetch<const T> grad_outputs;
  ViewPrefetch<T> grad_q, grad_k, grad_v, grad_beta, grad_alpha;

  BackwardPrefetch(const DeltaRuleBackward<T>& p, const HeadGroup& g)
      : inputs(p, g),
        grad_outputs(p.grad_outputs, g, p.shape.value_dim),
        grad_q(p.grad_q, g, p.shape.key_dim),
        grad_k(p.grad_k, g, p.shape.key_dim),
        grad_v(p.grad_v, g, p.shape.value_dim),
        grad_beta(p.grad_beta, g, 1),
        grad_alpha(p.grad_alpha, g, p.shape.decay_width()) {}
  [[gnu::always_inline]] void fetch(const HeadGroup& g, int64_t t) const {
    inputs.fetch(g, t), grad_outputs.fetch(g, t);
    grad_q.fetch(g, t), grad_k.fetch(g, t), grad_v.fetch(g, t), grad_beta.fetch(g, t);
    grad_alpha.fetch(g, t);
  }
};

// delta_rule_row_step on every row of every lane's state S ([dv][dk] columns).
template <bool Erase, bool KeyDecay, typename T>
void step_state(Lanes<T>* state, const StepInputs<T>& in, int64_t dk, int64_t dv) {
  for (int64_t i = 0; i < dv; ++i) {
    delta_rule_row_step<Erase>(state + i * dk, LaneColumns<T>{in.k}, in.v[i], in.beta,
                               in.template decay<KeyDecay>(), dk);
  }
}

// delta_rule_forward_row for every row of the group's heads.
template <bool Erase, bool KeyDecay, typename T, int64_t Dk, int64_t Dv>
void forward_group(const DeltaRuleForward<T>& p, const HeadGroup& group) {
  const DeltaRuleShape& s = p.shape;
  const int64_t dk = dim_of<Dk>(s.key_dim), dv = dim_of<Dv>(s.value_dim);
  const int64_t matrix = dk * dv;
  TileScratch<T> columns(matrix + 3 * dk + 2 * dv);
  Lanes<T>* state = columns.data();
  Lanes<T>* rest = state + matrix;
  StepInputs<T> in{dk, dv, rest, rest + dk, rest + 2 * dk, rest + 2 * dk + dv, {}, {}};
  Lanes<T>* out = in.key_decays + dk;
  if (p.state_in) gather(lane_rows(p.state_in, matrix, group), matrix, state);
  std::optional<ForwardPrefetch<T>> prefetch;
  if (s.length >= kPrefetchMinLength) prefetch.emplace(p, group);
  const int64_t checkpoint_stride = s.checkpoint_count() * matrix;
  for (int64_t t = 0; t < s.length; ++t) {
    if (p.checkpoints && t % s.checkpoint_every == 0) {
      const int64_t at = t / s.checkpoint_every * matrix;
      scatter(state, matrix, group, lane_rows(p.checkpoints + at, checkpoint_stride, group));
    }
    if (prefetch && t + kPrefetchAhead < s.length) prefetch->fetch(group, t + kPrefetchAhead);
    in.read(p, group, t, true);
    step_state<Erase, KeyDecay, T>(state, in, dk, dv);
    for (int64_t i = 0; i < dv; ++i)
      out[i] = delta_rule_row_output(state + i * dk, LaneColumns<T>{in.q}, dk);
    scatter(out, dv, group, rows_at(p.outputs, group, t));
  }
  scatter(state, matrix, group, lane_rows(p.state_out, matrix, group));
}

// delta_rule_backward_head for every lane's head.
template <bool Erase, bool KeyDecay, typename T, int64_t Dk, int64_t Dv>
void backward_group(const DeltaRuleBackward<T>& p, const HeadGroup& group) {
  const DeltaRuleShape& s = p.shape;
  const int64_t dk = dim_of<Dk>(s.key_dim), dv = dim_of<Dv>(s.value_dim);
  const int64_t matrix = dk * dv, every = s.checkpoint_every;
  // ds, the states of one segment, the step's inputs, and the step's gradients.
  TileScratch<T> columns((every + 2) * matrix + 6 * dk + 3 * dv);
  Lanes<T>* ds = columns.data();
  Lanes<T>* states = ds + matrix;
  Lanes<T>* rest = states + (every + 1) * matrix;
  StepInputs<T> in{dk, dv, rest, rest + dk, rest + 2 * dk, rest + 2 * dk + dv, {}, {}};
  Lanes<T>* grad_output = in.key_decays + dk;
  Lanes<T>* grad_q = grad_output + dv;
  Lanes<T>* grad_k = grad_q + dk;
  Lanes<T>* grad_v = grad_k + dk;
  Lanes<T>* grad_key_decays = grad_v + dv;  // [dk] (KeyDecay)
  if (p.grad_state_out) gather(lane_rows(p.grad_state_out, matrix, group), matrix, ds);
  std::optional<BackwardPrefetch<T>> prefetch;
  if (s.length >= kPrefetchMinLength) prefetch.emplace(p, group);
  const int64_t checkpoint_stride = s.checkpoint_count() * matrix;
  for (int64_t segment = s.checkpoint_count() - 1; segment >= 0; --segment) {
    const int64_t start = segment * every;
    const int64_t end = std::min(start + every, s.length);
    // delta_rule_recompute_segment: states[n + 1] is the state after token start + n.
    gather(lane_rows(p.checkpoints + segment * matrix, checkpoint_stride, group), matrix, states);
    for (int64_t t = start; t < end; ++t) {
      Lanes<T>* next = states + (t - start + 1) * matrix;
      std::copy(next - matrix, next, next);
      in.read(p, group, t, false);
      step_state<Erase, KeyDecay, T>(next, in, dk, dv);
    }
    // delta_rule_backward_token, tokens from last to first.
    for (int64_t t = end - 1; t >= start; --t) {
      const Lanes<T>* prev = states + (t - start) * matrix;
      const Lanes<T>* cur = prev + matrix;
      // Step t − K lies in the segment the backward takes next, whose recompute and walk read it.
      if (prefetch && t - every >= 0) prefetch->fetch(group, t - every);
      in.read(p, group, t, true);
      if (p.grad_outputs) {
        gather(rows_at(p.grad_outputs, group, t), dv, grad_output);
      } else {
        std::fill(grad_output, grad_output + dv, Lanes<T>{});
      }
      std::fill(grad_q, grad_q + 2 * dk, Lanes<T>{});
      Lanes<T> grad_beta{}, grad_alpha{};
      if constexpr (KeyDecay) std::fill(grad_key_decays, grad_key_decays + dk, Lanes<T>{});
      const auto grad_decay = [&] {
        if constexpr (KeyDecay) {
          return KeyLaneDecayGrad<T>{grad_key_decays};
        } else {
          return UniformLaneDecayGrad<T>{grad_alpha};
        }
      }();
      for (int64_t i = 0; i < dv; ++i) {
        grad_v[i] = delta_rule_row_backward<Erase>(
            ds + i * dk, prev + i * dk, cur + i * dk, LaneColumns<T>{in.q}, LaneColumns<T>{in.k},
            in.v[i], grad_output[i], in.beta, in.template decay<KeyDecay>(), dk, grad_q, grad_k,
            grad_beta, grad_decay);
      }
      scatter(grad_q, dk, group, rows_at(p.grad_q, group, t));
      scatter(grad_k, dk, group, rows_at(p.grad_k, group, t));
      scatter(grad_v, dv, group, rows_at(p.grad_v, group, t));
      scatter(&grad_beta, 1, group, rows_at(p.grad_beta, group, t));
      if (p.grad_alpha) {
        scatter(KeyDecay ? grad_key_decays : &grad_alpha, s.decay_width(), group,
                rows_at(p.grad_alpha, group, t));
      }
    }
  }
  if (p.grad_state_in) scatter(ds, matrix, group, lane_rows(p.grad_state_in, matrix, group));
}

// A column of kTileRows lanes as the machine's own vectors, for the row groups' arithmetic. GCC
// keeps a generic vector wider than the registers (Lanes<float> is 16 floats, two AVX2 registers)
// in memory and copies it through general registers around every operation; as an array of
// register-wide vectors it stays in registers. Each lane's arithmetic is the same: the same bits.
#if defined(__AVX512F__)
constexpr int64_t kRegisterBytes = 64;
#elif defined(__AVX__)
constexpr int64_t kRegisterBytes = 32;
#else
constexpr int64_t kRegisterBytes = 16;
#endif

template <typename T>
struct __attribute__((__may_alias__)) SplitLanes {
  static constexpr int64_t kParts = kTileRows * int64_t(sizeof(T)) / kRegisterBytes;
  typedef T Part __attribute__((vector_size(kRegisterBytes), __may_alias__));
  Part part[kParts];

  static SplitLanes all(T x) {
    SplitLanes v;
    for (int64_t i = 0; i < kParts; ++i) v.part[i] = Part{} + x;
    return v;
  }
  static SplitLanes of(const Lanes<T>& x) {
    SplitLanes v;
    std::memcpy(&v, &x, sizeof v);
    return v;
  }
  Lanes<T> lanes() const {
    Lanes<T> x;
    std::memcpy(&x, this, sizeof x);
    return x;
  }
  SplitLanes& operator+=(const SplitLanes& b) {
    for (int64_t i = 0; i < kParts; ++i) part[i] += b.part[i];
    return *this;
  }
  SplitLanes& operator-=(const SplitLanes& b) {
    for (int64_t i = 0; i < kParts; ++i) part[i] -= b.part[i];
    return *this;
  }
  SplitLanes& operator*=(const SplitLanes& b) {
    for (int64_t i = 0; i < kParts; ++i) part[i] *= b.part[i];
    return *this;
  }
  friend SplitLanes operator+(SplitLanes a, const SplitLanes& b) { return a += b; }
  friend SplitLanes operator-(SplitLanes a, const SplitLanes& b) { return a -= b; }
  friend SplitLanes operator*(SplitLanes a, const SplitLanes& b) { return a *= b; }
};
static_assert(sizeof(SplitLanes<float>) == sizeof(Lanes<float>));
static_assert(sizeof(SplitLanes<double>) == sizeof(Lanes<double>));

// Large states, one head at a time, its rows kTileRows at a time: one row per lane (a row group,
// kept as dk columns), each group through the whole sequence before the next. Row i of S only
// ever sees v_t[i], so each lane does for its row what delta_rule_forward_row and
// delta_rule_backward_token do, in the same order, and gives their bits; k_t, q_t, β_t and α_t
// are the same for every row, broadcast. A dot product along a row is then one chain of vector
// additions for sixteen rows instead of a scalar chain per row, and a group's states (the
// backward's segment: K + 1 of them) stay in the cache where a whole head's would not. The
// backward's sums over rows (∂q, ∂k, ∂β, ∂α at each token) are kept in the output: each group
// adds its terms lane after lane, after the groups before it, so every sum runs in row order.
// A term is 0 + x where the row body adds x itself; a sum that starts at +0 is never −0, so the
// sign of a zero term changes no bit.

// Rows [g·kTileRows, …) of a head: how many, and moves between the head's [dv, dk] matrix or a
// row of dv numbers (v_t, ∂o_t) and the group's columns (lanes past dv zero).
struct RowGroup {
  int64_t first, rows, dk;

  RowGroup(int64_t g, int64_t dv, int64_t dk_)
      : first(g * kTileRows), rows(std::min(kTileRows, dv - g * kTileRows)), dk(dk_) {}
  template <typename T>
  void load(const T* matrix, SplitLanes<T>* columns) const {
    load_tile(matrix + first * dk, dk, dk, rows, reinterpret_cast<Lanes<T>*>(columns));
  }
  template <typename T>
  void store(const SplitLanes<T>* columns, T* matrix) const {
    store_tile(reinterpret_cast<const Lanes<T>*>(columns), dk, rows, matrix + first * dk, dk);
  }
  template <typename T>
  SplitLanes<T> column(const T* values) const {
    return SplitLanes<T>::of(load_lanes(values + first, rows));
  }
  template <typename T>
  void store_column(const SplitLanes<T>& x, T* values) const {
    store_lanes(x.lanes(), rows, values + first);
  }
};

int64_t row_group_count(const DeltaRuleShape& s) {
  return (s.value_dim + kTileRows - 1) / kTileRows;
}

// k_j (q_j, α_j) of a step, broadcast to every row of a group.
template <typename T>
struct BroadcastRow {
  const T* data;
  SplitLanes<T> operator()(int64_t j) const { return SplitLanes<T>::all(data[j]); }
};

// What one step gives every row: k_t, β_t and α_t as the step bodies read them.
template <bool KeyDecay, typename T>
struct StepShared {
  BroadcastRow<T> k;
  SplitLanes<T> beta;
  std::conditional_t<KeyDecay, BroadcastRow<T>, UniformDecay<SplitLanes<T>>> alpha;

  template <typename P>
  StepShared(const P& p, int64_t b, int64_t h, int64_t t)
      : k{p.k.at(b, h, t)}, beta(SplitLanes<T>::all(load(*p.beta.at(b, h, t)))) {
    if constexpr (KeyDecay) {
      alpha = BroadcastRow<T>{p.alpha.at(b, h, t)};
    } else {
      alpha.value = SplitLanes<T>::all(p.alpha ? load(*p.alpha.at(b, h, t)) : T(1));
    }
  }
};

// delta_rule_forward_row for the rows of one group of one head. `state`: dk columns.
template <bool Erase, bool KeyDecay, typename T, int64_t Dk>
void forward_row_group(const DeltaRuleForward<T>& p, int64_t head, const RowGroup& group,
                       SplitLanes<T>* state) {
  static_assert(std::is_same_v<T, AccumulatorOf<T>>, "the CPU runs float and double");
  const DeltaRuleShape& s = p.shape;
  const int64_t dk = dim_of<Dk>(s.key_dim), matrix = s.matrix_size();
  const int64_t b = head / s.heads, h = head % s.heads;
  if (p.state_in) {
    group.load(p.state_in + head * matrix, state);
  } else {
    std::fill(state, state + dk, SplitLanes<T>{});
  }
  for (int64_t t = 0; t < s.length; ++t) {
    if (p.checkpoints && t % s.checkpoint_every == 0) {
      group.store(state,
                  p.checkpoints + (head * s.checkpoint_count() + t / s.checkpoint_every) * matrix);
    }
    const StepShared<KeyDecay, T> at(p, b, h, t);
    delta_rule_row_step<Erase>(state, at.k, group.column(p.v.at(b, h, t)), at.beta, at.alpha, dk);
    group.store_column(delta_rule_row_output(state, BroadcastRow<T>{p.q.at(b, h, t)}, dk),
                       p.outputs.at(b, h, t));
  }
  group.store(state, p.state_out + head * matrix);
}

// Lanes<T> columns a group's backward needs: ds, one segment's states, and the terms of ∂q, ∂k
// and ∂α.
int64_t backward_row_group_columns(const DeltaRuleShape& s) {
  return (s.checkpoint_every + 2 + 3) * s.key_dim;
}

// One token's sums over rows where the backward keeps them: its rows of ∂q, ∂k, ∂β, ∂α.
template <typename T>
struct TokenSums {
  T *q, *k, *beta, *alpha;  // alpha null: not wanted

  TokenSums(const DeltaRuleBackward<T>& p, int64_t b, int64_t h, int64_t t)
      : q(p.grad_q.at(b, h, t)),
        k(p.grad_k.at(b, h, t)),
        beta(p.grad_beta.at(b, h, t)),
        alpha(p.grad_alpha ? p.grad_alpha.at(b, h, t) : nullptr) {}
};

// delta_rule_backward_head for the rows of one group, its terms added to the sums over rows.
template <bool Erase, bool KeyDecay, typename T, int64_t Dk>
void backward_row_group(const DeltaRuleBackward<T>& p, int64_t head, const RowGroup& group,
                        SplitLanes<T>* scratch) {
  const DeltaRuleShape& s = p.shape;
  const int64_t dk = dim_of<Dk>(s.key_dim), matrix = s.matrix_size();
  const int64_t every = s.checkpoint_every;
  const int64_t b = head / s.heads, h = head % s.heads;
  SplitLanes<T>* ds = scratch;
  SplitLanes<T>* states = ds + dk;  // every + 1 states of dk columns
  SplitLanes<T>* term_q = states + (every + 1) * dk;
  SplitLanes<T>* term_k = term_q + dk;
  SplitLanes<T>* term_alpha = term_k + dk;
  if (p.grad_state_out) {
    group.load(p.grad_state_out + head * matrix, ds);
  } else {
    std::fill(ds, ds + dk, SplitLanes<T>{});
  }
  for (int64_t segment = s.checkpoint_count() - 1; segment >= 0; --segment) {
    const int64_t start = segment * every;
    const int64_t end = std::min(start + every, s.length);
    // delta_rule_recompute_segment: states[n] is the state after token start + n − 1.
    group.load(p.checkpoints + (head * s.checkpoint_count() + segment) * matrix, states);
    for (int64_t t = start; t < end; ++t) {
      SplitLanes<T>* next = states + (t - start + 1) * dk;
      std::copy(next - dk, next, next);
      const StepShared<KeyDecay, T> at(p, b, h, t);
      delta_rule_row_step<Erase>(next, at.k, group.column(p.v.at(b, h, t)), at.beta, at.alpha, dk);
    }
    for (int64_t t = end - 1; t >= start; --t) {
      const SplitLanes<T>* prev = states + (t - start) * dk;
      const StepShared<KeyDecay, T> at(p, b, h, t);
      const TokenSums<T> sums(p, b, h, t);
      std::fill(term_q, term_q + 3 * dk, SplitLanes<T>{});
      SplitLanes<T> term_beta{};
      const SplitLanes<T> grad_output =
          p.grad_outputs ? group.column(p.grad_outputs.at(b, h, t)) : SplitLanes<T>{};
      // A uniform α's sum too runs over every (row, key) in order, so it takes each term.
      const SplitLanes<T> grad_v = delta_rule_row_backward<Erase>(
          ds, prev, prev + dk, BroadcastRow<T>{p.q.at(b, h, t)}, at.k,
          group.column(p.v.at(b, h, t)), grad_output, at.beta, at.alpha, dk, term_q, term_k,
          term_beta, KeyDecayGrad<SplitLanes<T>>{term_alpha});
      group.store_column(grad_v, p.grad_v.at(b, h, t));
      add_lanes_in_order(reinterpret_cast<const Lanes<T>*>(term_q), dk, group.rows, sums.q);
      add_lanes_in_order(reinterpret_cast<const Lanes<T>*>(term_k), dk, group.rows, sums.k);
      const Lanes<T> beta_terms = term_beta.lanes();
      for (int64_t r = 0; r < group.rows; ++r) *sums.beta += beta_terms[r];
      if (!sums.alpha) continue;
      if constexpr (KeyDecay) {
        add_lanes_in_order(reinterpret_cast<const Lanes<T>*>(term_alpha), dk, group.rows,
                           sums.alpha);
      } else {
        const T* terms = reinterpret_cast<const T*>(term_alpha);  // [dk][kTileRows]
        T sum = *sums.alpha;
        for (int64_t r = 0; r < group.rows; ++r) {
          for (int64_t j = 0; j < dk; ++j) sum += terms[j * kTileRows + r];
        }
        *sums.alpha = sum;
      }
    }
  }
  if (p.grad_state_in) group.store(ds, p.grad_state_in + head * matrix);
}

// The forward of heads [begin, end), group by group.
template <bool Erase, bool KeyDecay, typename T, int64_t Dk>
void forward_row_groups(const DeltaRuleForward<T>& p, int64_t begin, int64_t end) {
  const DeltaRuleShape& s = p.shape;
  TileScratch<T> scratch(s.key_dim);
  auto* state = reinterpret_cast<SplitLanes<T>*>(scratch.data());
  for (int64_t head = begin; head < end; ++head) {
    for (int64_t g = 0; g < row_group_count(s); ++g)
      forward_row_group<Erase, KeyDecay, T, Dk>(p, head, RowGroup(g, s.value_dim, s.key_dim),
                                                state);
  }
}

// The backward of heads [begin, end): each token's sums over rows start at zero, then the
// groups add their rows in order.
template <bool Erase, bool KeyDecay, typename T, int64_t Dk>
void backward_row_groups(const DeltaRuleBackward<T>& p, int64_t begin, int64_t end) {
  const DeltaRuleShape& s = p.shape;
  TileScratch<T> scratch(backward_row_group_columns(s));
  auto* columns = reinterpret_cast<SplitLanes<T>*>(scratch.data());
  for (int64_t head = begin; head < end; ++head) {
    const int64_t b = head / s.heads, h = head % s.heads;
    for (int64_t t = 0; t < s.length; ++t) {
      const TokenSums<T> sums(p, b, h, t);
      std::fill(sums.q, sums.q + s.key_dim, T(0));
      std::fill(sums.k, sums.k + s.key_dim, T(0));
      *sums.beta = 0;
      if (sums.alpha) std::fill(sums.alpha, sums.alpha + s.decay_width(), T(0));
    }
    for (int64_t g = 0; g < row_group_count(s); ++g)
      backward_row_group<Erase, KeyDecay, T, Dk>(p, head, RowGroup(g, s.value_dim, s.key_dim),
                                                 columns);
  }
}

// Calls body(group) for groups of up to kTileRows heads of [begin, end).
template <typename F>
void for_head_groups(const DeltaRuleShape& shape, int64_t begin, int64_t end, F&& body) {
  for_lane_groups(begin, end, [&](const LaneGroup& g) { body(HeadGroup(g, shape.heads)); });
}

template <typename T>
void forward_heads(const DeltaRuleForward<T>& p, int64_t begin, int64_t end) {
  const DeltaRuleShape& s = p.shape;
  with_update(s, [&]<bool Erase, bool KeyDecay>() {
    with_fixed_dims(s.key_dim, s.value_dim, [&]<int64_t Dk, int64_t Dv>() {
      if constexpr (Dk * Dv <= kLanesMaxMatrix) {  // 0: sizes read at run time
        if (s.matrix_size() <= kLanesMaxMatrix) {
          for_head_groups(s, begin, end, [&](const HeadGroup& g) {
            forward_group<Erase, KeyDecay, T, Dk, Dv>(p, g);
          });
          return;
        }
      }
      forward_row_groups<Erase, KeyDecay, T, Dk>(p, begin, end);
    });
  });
}

template <typename T>
void backward_heads(const DeltaRuleBackward<T>& p, int64_t begin, int64_t end) {
  const DeltaRuleShape& s = p.shape;
  with_update(s, [&]<bool Erase, bool KeyDecay>() {
    with_fixed_dims(s.key_dim, s.value_dim, [&]<int64_t Dk, int64_t Dv>() {
      if constexpr (Dk * Dv <= kLanesMaxMatrix) {
        if (s.matrix_size() <= kLanesMaxMatrix) {
          for_head_groups(s, begin, end, [&](const HeadGroup& g) {
            backward_group<Erase, KeyDecay, T, Dk, Dv>(p, g);
          });
          return;
        }
      }
      backward_row_groups<Erase, KeyDecay, T, Dk>(p, begin, end);
    });
  });
}

}  // namespace

void delta_rule_forward_cpu(const DeltaRuleForward<float>& p, int64_t begin, int64_t end) {
  forward_heads(p, begin, end);
}
void delta_rule_forward_cpu(const DeltaRuleForward<double>& p, int64_t begin, int64_t end) {
  forward_heads(p, begin, end);
}
void delta_rule_backward_cpu(const DeltaRuleBackward<float>& p, int64_t begin, int64_t end) {
  backward_heads(p, begin, end);
}
void delta_rule_backward_cpu(const DeltaRuleBackward<double>& p, int64_t begin, int64_t end) {
  backward_heads(p, begin, end);
}

}  // namespace memscript::kernels
