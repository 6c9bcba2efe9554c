#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "causal_attention.h"
#include "fast_exp.h"
#include "fixed_dims.h"

namespace memscript::kernels {

namespace {

// A head's keys and values are copied transposed, [head_dim, keys], so that every pass over
// the keys of one query runs along contiguous memory and vectorizes: scores, exponentials,
// the weighted sums and the gradient updates are all loops over keys.
//
// Sums over keys use kLanes partial sums added in a fixed order at the end: the compiler may
// vectorize them with any width, and the result stays the same bits on every machine. Rows of
// keys are padded to a multiple of kLanes (zero keys and values, zero probability), so that no
// pass over a row ends in a scalar tail: at the training lengths (16, 32) most rows are shorter
// than one vector.
constexpr int64_t kLanes = 16;

int64_t padded(int64_t count) { return (count + kLanes - 1) / kLanes * kLanes; }

template <typename T>
T dot_over_keys(const T* __restrict a, const T* __restrict b, int64_t n) {
  T part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) part[l] += a[j + l] * b[j + l];
  }
  T sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += part[l];
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// The largest of a[0 .. n): exact whatever the order, so it may go lane by lane.
template <typename T>
T max_over_keys(const T* __restrict a, int64_t n) {
  T part[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) part[l] = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) part[l] = part[l] < a[j + l] ? a[j + l] : part[l];
  }
  T largest = -std::numeric_limits<T>::infinity();
  for (int64_t l = 0; l < kLanes; ++l) largest = largest < part[l] ? part[l] : largest;
  for (; j < n; ++j) largest = largest < a[j] ? a[j] : largest;
  return largest;
}

template <typename T>
T sum_over_keys(const T* __restrict a, int64_t n) {
  T part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) part[l] += a[j + l];
  }
  T sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += part[l];
  for (; j < n; ++j) sum += a[j];
  return sum;
}

// x[c][j] = view.at(b, h, j)[c] for the head's keys: [dim, padded(keys)], zero past the keys.
template <typename T>
void transpose_head(const SequenceView<const T>& view, int64_t b, int64_t h, int64_t keys,
                    int64_t dim, T* x) {
  const int64_t stride = padded(keys);
  std::fill(x, x + dim * stride, T(0));
  for (int64_t j = 0; j < keys; ++j) {
    const T* row = view.at(b, h, j);
    for (int64_t c = 0; c < dim; ++c) x[c * stride + j] = row[c];
  }
}

// row[j] = exp(row[j] − shift) for the keys a query sees (j < count), 0 for the padding.
template <typename T>
void exponentiate(T* __restrict row, int64_t count, T shift) {
  for (int64_t j = 0; j < padded(count); ++j) {
    const T e = exp_of(row[j] - shift);
    row[j] = j < count ? e : T(0);
  }
}

// scores[j] = scale · q · k_j over the padded row of keys j < count (from the transposed keys,
// row stride `stride`); −∞ past count, where the query must not look.
template <typename T>
void scores_of(const T* __restrict q, const T* __restrict keys_t, int64_t stride, int64_t count,
               int64_t dim, T scale, T* __restrict scores) {
  const int64_t width = padded(count);
  std::fill(scores, scores + width, T(0));
  for (int64_t c = 0; c < dim; ++c) {
    const T qc = q[c];
    const T* k = keys_t + c * stride;
    for (int64_t j = 0; j < width; ++j) scores[j] += qc * k[j];
  }
  for (int64_t j = 0; j < width; ++j)
    scores[j] = j < count ? scores[j] * scale : -std::numeric_limits<T>::infinity();
}

// Per head: the transposed keys and values, and one row of scores.
template <typename T>
struct HeadScratch {
  std::vector<T> keys_t, values_t, scores, grad_keys_t, grad_values_t, grad_scores;
};

template <typename T, int64_t Dim>
void forward_head(const AttentionForward<T>& p, int64_t head, HeadScratch<T>& w) {
  const AttentionShape& s = p.shape;
  const int64_t b = head / s.heads, h = head % s.heads, dim = dim_of<Dim>(s.head_dim);
  const int64_t stride = padded(s.keys);
  transpose_head(p.k, b, h, s.keys, dim, w.keys_t.data());
  transpose_head(p.v, b, h, s.keys, dim, w.values_t.data());
  T* scores = w.scores.data();
  for (int64_t i = 0; i < s.queries; ++i) {
    const int64_t count = s.last_key(i) + 1, width = padded(count);
    scores_of(p.q.at(b, h, i), w.keys_t.data(), stride, count, dim, p.scale, scores);
    const T largest = max_over_keys(scores, width);
    exponentiate(scores, count, largest);
    const T total = sum_over_keys(scores, width);
    T* out = p.out.at(b, h, i);
    for (int64_t c = 0; c < dim; ++c)
      out[c] = dot_over_keys(scores, w.values_t.data() + c * stride, width) / total;
    if (p.log_sum_exp) p.log_sum_exp[head * s.queries + i] = largest + std::log(total);
  }
}

template <typename T, int64_t Dim>
void backward_head(const AttentionBackward<T>& p, int64_t head, HeadScratch<T>& w) {
  const AttentionShape& s = p.shape;
  const int64_t b = head / s.heads, h = head % s.heads, dim = dim_of<Dim>(s.head_dim);
  const int64_t stride = padded(s.keys);
  transpose_head(p.k, b, h, s.keys, dim, w.keys_t.data());
  transpose_head(p.v, b, h, s.keys, dim, w.values_t.data());
  std::fill(w.grad_keys_t.begin(), w.grad_keys_t.end(), T(0));
  std::fill(w.grad_values_t.begin(), w.grad_values_t.end(), T(0));
  T* probabilities = w.scores.data();
  T* grad_scores = w.grad_scores.data();
  for (int64_t i = 0; i < s.queries; ++i) {
    const int64_t count = s.last_key(i) + 1, width = padded(count);
    const T* q = p.q.at(b, h, i);
    const T* grad_out = p.grad_out.at(b, h, i);
    const T* out = p.out.at(b, h, i);
    scores_of(q, w.keys_t.data(), stride, count, dim, p.scale, probabilities);
    exponentiate(probabilities, count, p.log_sum_exp[head * s.queries + i]);
    // dP_ij = ∂o_i · v_j, then dS_ij = P_ij (dP_ij − ∂o_i · o_i) (times the scale, for ∂q, ∂k).
    T along = 0;
    for (int64_t c = 0; c < dim; ++c) along += grad_out[c] * out[c];
    std::fill(grad_scores, grad_scores + width, T(0));
    for (int64_t c = 0; c < dim; ++c) {
      const T g = grad_out[c];
      const T* v = w.values_t.data() + c * stride;
      T* grad_v = w.grad_values_t.data() + c * stride;
      for (int64_t j = 0; j < width; ++j) {
        grad_scores[j] += g * v[j];
        grad_v[j] += probabilities[j] * g;
      }
    }
    for (int64_t j = 0; j < width; ++j)
      grad_scores[j] = probabilities[j] * (grad_scores[j] - along) * p.scale;
    T* grad_q = p.grad_q.at(b, h, i);
    for (int64_t c = 0; c < dim; ++c) {
      grad_q[c] = dot_over_keys(grad_scores, w.keys_t.data() + c * stride, width);
      const T qc = q[c];
      T* grad_k = w.grad_keys_t.data() + c * stride;
      for (int64_t j = 0; j < width; ++j) grad_k[j] += grad_scores[j] * qc;
    }
  }
  for (int64_t j = 0; j < s.keys; ++j) {
    T* grad_k = p.grad_k.at(b, h, j);
    T* grad_v = p.grad_v.at(b, h, j);
    for (int64_t c = 0; c < dim; ++c) {
      grad_k[c] = w.grad_keys_t[c * stride + j];
      grad_v[c] = w.grad_values_t[c * stride + j];
    }
  }
}

template <typename T>
HeadScratch<T> scratch_for(const AttentionShape& s, bool backward) {
  const auto matrix = static_cast<size_t>(padded(s.keys) * s.head_dim);
  const auto row = static_cast<size_t>(padded(s.keys));
  HeadScratch<T> w{std::vector<T>(matrix), std::vector<T>(matrix), std::vector<T>(row), {}, {}, {}};
  if (backward) {
    w.grad_keys_t.resize(matrix);
    w.grad_values_t.resize(matrix);
    w.grad_scores.resize(row);
  }
  return w;
}

template <typename T>
void forward_heads(const AttentionForward<T>& p, int64_t begin, int64_t end) {
  HeadScratch<T> scratch = scratch_for<T>(p.shape, false);
  with_fixed_dims(p.shape.head_dim, p.shape.head_dim, [&]<int64_t Dim, int64_t>() {
    for (int64_t head = begin; head < end; ++head) forward_head<T, Dim>(p, head, scratch);
  });
}

template <typename T>
void backward_heads(const AttentionBackward<T>& p, int64_t begin, int64_t end) {
  HeadScratch<T> scratch = scratch_for<T>(p.shape, true);
  with_fixed_dims(p.shape.head_dim, p.shape.head_dim, [&]<int64_t Dim, int64_t>() {
    for (int64_t head = begin; head < end; ++head) backward_head<T, Dim>(p, head, scratch);
  });
}

}  // namespace

void causal_attention_forward_cpu(const AttentionForward<float>& p, int64_t begin, int64_t end) {
  forward_heads(p, begin, end);
}
void causal_attention_forward_cpu(const AttentionForward<double>& p, int64_t begin, int64_t end) {
  forward_heads(p, begin, end);
}
void causal_attention_backward_cpu(const AttentionBackward<float>& p, int64_t begin, int64_t end) {
  backward_heads(p, begin, end);
}
void causal_attention_backward_cpu(const AttentionBackward<double>& p, int64_t begin, int64_t end) {
  backward_heads(p, begin, end);
}

}  // namespace memscript::kernels
