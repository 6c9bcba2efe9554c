#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/causal_attention/causal_attention.h"
#include "kernels/common/fast_exp.h"
#include "kernels/common/fixed_dims.h"
#include "kernels/common/row_tile.h"

namespace memscript::kernels {

namespace {

// Queries go through in tiles of kTileRows, one query per vector lane (row_tile.h), and every
// pass walks the keys that the tile's last query sees, each key's numbers broadcast to all
// lanes. A lane masks out the keys past its own query. So every loop is whole vectors whatever
// the length (the study trains at 16 and 32 keys, shorter than one vector of keys), and each
// query's sums over keys run in key order.
//
// The key and value gradients are sums over queries: each lane adds its queries' terms into
// per-key partials in tile order, and the lanes are added in lane order at the end of the head.
// One head per work item, so the gradients are the same bits for any thread count.

template <typename T>
Lanes<T> log_lanes(Lanes<T> x) {
  for (int64_t r = 0; r < kTileRows; ++r) x[r] = std::log(x[r]);
  return x;
}

// Queries [first, first + count) of one head.
struct QueryTile {
  int64_t b, h, first, count;
};

// Per lane, the last key its query sees, as a number (−1 past the tile's queries); and the
// number of keys the tile's passes walk.
template <typename T>
Lanes<T> last_keys(const AttentionShape& s, const QueryTile& tile) {
  Lanes<T> last = broadcast<T>(T(-1));
  for (int64_t r = 0; r < tile.count; ++r) last[r] = static_cast<T>(s.last_key(tile.first + r));
  return last;
}
inline int64_t keys_walked(const AttentionShape& s, const QueryTile& tile) {
  return s.last_key(tile.first + tile.count - 1) + 1;
}

// columns[c][r] = view.at(b, h, first + r)[c] for the tile's queries, zero past them.
template <typename T>
void load_queries(const SequenceView<const T>& view, const QueryTile& tile, int64_t dim,
                  Lanes<T>* columns) {
  for (int64_t c = 0; c < dim; ++c) columns[c] = Lanes<T>{};
  for (int64_t r = 0; r < tile.count; ++r) {
    const T* row = view.at(tile.b, tile.h, tile.first + r);
    for (int64_t c = 0; c < dim; ++c) columns[c][r] = row[c];
  }
}

template <typename T>
void store_queries(const Lanes<T>* columns, const QueryTile& tile, int64_t dim,
                   const SequenceView<T>& view) {
  for (int64_t r = 0; r < tile.count; ++r) {
    T* row = view.at(tile.b, tile.h, tile.first + r);
    for (int64_t c = 0; c < dim; ++c) row[c] = columns[c][r];
  }
}

// scale · q · k for every lane, the sum over dimensions in order.
template <typename T>
Lanes<T> scores_of(const Lanes<T>* q, const T* k, int64_t dim, T scale) {
  Lanes<T> s{};
  for (int64_t c = 0; c < dim; ++c) s += q[c] * k[c];
  return s * scale;
}

// The head's ALiBi slope, 0 without one.
template <typename Params>
auto slope_of(const Params& p, const QueryTile& tile) {
  return p.slopes ? p.slopes[tile.h] : decltype(p.scale)(0);
}

// Scores with ALiBi's bias −slope · (p_i − j), p_i = each lane's last key. Left alone without a
// slope, so that attention without ALiBi keeps its bits.
template <typename T>
Lanes<T> with_bias(Lanes<T> s, T slope, const Lanes<T>& last, int64_t j) {
  if (slope == T(0)) return s;
  return s - slope * (last - static_cast<T>(j));
}

// `columns` holds 2 · dim columns, `scores` one per key.
template <typename T, int64_t Dim>
void forward_tile(const AttentionForward<T>& p, const QueryTile& tile, Lanes<T>* columns,
                  Lanes<T>* scores) {
  const int64_t dim = dim_of<Dim>(p.shape.head_dim);
  Lanes<T>* q = columns;
  Lanes<T>* acc = columns + dim;
  load_queries(p.q, tile, dim, q);
  const Lanes<T> last = last_keys<T>(p.shape, tile);
  const int64_t keys = keys_walked(p.shape, tile);
  const T slope = slope_of(p, tile);
  const Lanes<T> minus_infinity = broadcast<T>(-std::numeric_limits<T>::infinity());
  Lanes<T> largest = minus_infinity;
  for (int64_t j = 0; j < keys; ++j) {
    const Lanes<T> s =
        with_bias(scores_of(q, p.k.at(tile.b, tile.h, j), dim, p.scale), slope, last, j);
    const auto seen = broadcast<T>(static_cast<T>(j)) <= last;
    scores[j] = seen ? s : minus_infinity;
    largest = scores[j] > largest ? scores[j] : largest;
  }
  Lanes<T> total{};
  for (int64_t c = 0; c < dim; ++c) acc[c] = Lanes<T>{};
  for (int64_t j = 0; j < keys; ++j) {
    const auto seen = broadcast<T>(static_cast<T>(j)) <= last;
    const Lanes<T> e = seen ? exp_lanes(scores[j] - largest) : Lanes<T>{};
    total += e;
    const T* v = p.v.at(tile.b, tile.h, j);
    for (int64_t c = 0; c < dim; ++c) acc[c] += e * v[c];
  }
  for (int64_t c = 0; c < dim; ++c) acc[c] /= total;
  store_queries(acc, tile, dim, p.out);
  if (p.log_sum_exp) {
    store_lanes(largest + log_lanes<T>(total), tile.count,
                p.log_sum_exp + (tile.b * p.shape.heads + tile.h) * p.shape.queries + tile.first);
  }
}

// The tile's terms of the head's key and value gradients go into per-lane partials,
// grad_keys[j · dim + c] and grad_values[j · dim + c].
template <typename T, int64_t Dim>
void backward_tile(const AttentionBackward<T>& p, const QueryTile& tile, Lanes<T>* columns,
                   Lanes<T>* grad_keys, Lanes<T>* grad_values) {
  const int64_t dim = dim_of<Dim>(p.shape.head_dim);
  Lanes<T>* q = columns;
  Lanes<T>* grad_out = q + dim;
  Lanes<T>* out = grad_out + dim;
  Lanes<T>* grad_q = out + dim;
  load_queries(p.q, tile, dim, q);
  load_queries(p.grad_out, tile, dim, grad_out);
  load_queries(p.out, tile, dim, out);
  const Lanes<T> log_sum_exp = load_lanes(
      p.log_sum_exp + (tile.b * p.shape.heads + tile.h) * p.shape.queries + tile.first, tile.count);
  const Lanes<T> last = last_keys<T>(p.shape, tile);
  const int64_t keys = keys_walked(p.shape, tile);
  const T slope = slope_of(p, tile);
  // dP_ij = ∂o_i · v_j, then dS_ij = P_ij (dP_ij − ∂o_i · o_i) (times the scale, for ∂q, ∂k).
  Lanes<T> along{};
  for (int64_t c = 0; c < dim; ++c) along += grad_out[c] * out[c];
  for (int64_t c = 0; c < dim; ++c) grad_q[c] = Lanes<T>{};
  for (int64_t j = 0; j < keys; ++j) {
    const T* k = p.k.at(tile.b, tile.h, j);
    const T* v = p.v.at(tile.b, tile.h, j);
    const Lanes<T> s = with_bias(scores_of(q, k, dim, p.scale), slope, last, j);
    const auto seen = broadcast<T>(static_cast<T>(j)) <= last;
    const Lanes<T> probability = seen ? exp_lanes(s - log_sum_exp) : Lanes<T>{};
    Lanes<T> grad_probability{};
    for (int64_t c = 0; c < dim; ++c) grad_probability += grad_out[c] * v[c];
    const Lanes<T> grad_score = probability * (grad_probability - along) * p.scale;
    Lanes<T>* grad_k = grad_keys + j * dim;
    Lanes<T>* grad_v = grad_values + j * dim;
    for (int64_t c = 0; c < dim; ++c) {
      grad_q[c] += grad_score * k[c];
      grad_k[c] += grad_score * q[c];
      grad_v[c] += probability * grad_out[c];
    }
  }
  store_queries(grad_q, tile, dim, p.grad_q);
}

// Calls body(tile) for the query tiles of a head.
template <typename F>
void for_query_tiles(const AttentionShape& s, int64_t head, F&& body) {
  const int64_t b = head / s.heads, h = head % s.heads;
  for (int64_t first = 0; first < s.queries; first += kTileRows)
    body(QueryTile{b, h, first, std::min(kTileRows, s.queries - first)});
}

template <typename T>
void forward_heads(const AttentionForward<T>& p, int64_t begin, int64_t end) {
  TileScratch<T> columns(2 * p.shape.head_dim);
  TileScratch<T> scores(p.shape.keys);
  with_fixed_dims(p.shape.head_dim, p.shape.head_dim, [&]<int64_t Dim, int64_t>() {
    for (int64_t head = begin; head < end; ++head) {
      for_query_tiles(p.shape, head, [&](const QueryTile& tile) {
        forward_tile<T, Dim>(p, tile, columns.data(), scores.data());
      });
    }
  });
}

template <typename T>
void backward_heads(const AttentionBackward<T>& p, int64_t begin, int64_t end) {
  const AttentionShape& s = p.shape;
  const int64_t per_head = s.keys * s.head_dim;
  TileScratch<T> columns(4 * s.head_dim);
  TileScratch<T> partials(2 * per_head);
  std::vector<T> sums(static_cast<size_t>(2 * per_head));
  with_fixed_dims(s.head_dim, s.head_dim, [&]<int64_t Dim, int64_t>() {
    for (int64_t head = begin; head < end; ++head) {
      Lanes<T>* grad_keys = partials.data();
      Lanes<T>* grad_values = grad_keys + per_head;
      std::fill(grad_keys, grad_keys + 2 * per_head, Lanes<T>{});
      for_query_tiles(s, head, [&](const QueryTile& tile) {
        backward_tile<T, Dim>(p, tile, columns.data(), grad_keys, grad_values);
      });
      sum_lanes(grad_keys, 2 * per_head, sums.data());
      const int64_t b = head / s.heads, h = head % s.heads;
      for (int64_t j = 0; j < s.keys; ++j) {
        std::copy(sums.begin() + j * s.head_dim, sums.begin() + (j + 1) * s.head_dim,
                  p.grad_k.at(b, h, j));
        std::copy(sums.begin() + per_head + j * s.head_dim,
                  sums.begin() + per_head + (j + 1) * s.head_dim, p.grad_v.at(b, h, j));
      }
    }
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
