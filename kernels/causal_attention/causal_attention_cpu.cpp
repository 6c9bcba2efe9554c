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

// A head's relative-position keys r_{h,d} (or their gradient), column-major: column c at
// values[c · stride + kTileRows + d] for distance d, with kTileRows zeros either side. A tile's
// lanes see the distances d₀, d₀ + 1, …, d₀ + 15 at one key, d₀ = p_first − j, which run from
// −15 (keys past the last query's) to keys + 14 (lanes past the tile's queries): one vector
// load or store, and never out of the array.
template <typename T>
struct DistanceColumns {
  std::vector<T> values;
  int64_t stride;

  DistanceColumns(int64_t keys, int64_t dim)
      : values(static_cast<size_t>((keys + 2 * kTileRows) * dim)), stride(keys + 2 * kTileRows) {}
  T* at(int64_t c, int64_t first_distance) {
    return values.data() + c * stride + kTileRows + first_distance;
  }
  // The head's rows [keys, dim] into the columns (the pads stay zero).
  void load(const T* rows, int64_t keys, int64_t dim) {
    for (int64_t d = 0; d < keys; ++d)
      for (int64_t c = 0; c < dim; ++c) *at(c, d) = rows[d * dim + c];
  }
  void store(T* rows, int64_t keys, int64_t dim) {
    for (int64_t d = 0; d < keys; ++d)
      for (int64_t c = 0; c < dim; ++c) rows[d * dim + c] = *at(c, d);
  }
};

// The first lane's distance to key j.
inline int64_t first_distance(const AttentionShape& s, const QueryTile& tile, int64_t j) {
  return s.last_key(tile.first) - j;
}

// scale · q'_i · r_{p_i − j} for every lane, the sum over dimensions in order.
template <typename T>
Lanes<T> position_scores(const Lanes<T>* q_position, DistanceColumns<T>& table, int64_t distance,
                         int64_t dim, T scale) {
  Lanes<T> s{};
  for (int64_t c = 0; c < dim; ++c)
    s += q_position[c] * load_lanes(table.at(c, distance), kTileRows);
  return s * scale;
}

// A tile's scores at key j: content, relative positions where given, ALiBi's bias.
template <typename Params, typename T>
Lanes<T> tile_scores(const Params& p, const QueryTile& tile, const Lanes<T>* q,
                     const Lanes<T>* q_position, DistanceColumns<T>* table, const Lanes<T>& last,
                     int64_t j, int64_t dim) {
  Lanes<T> s = scores_of(q, p.k.at(tile.b, tile.h, j), dim, p.scale);
  if (table)
    s += position_scores(q_position, *table, first_distance(p.shape, tile, j), dim, p.scale);
  return with_bias(s, slope_of(p, tile), last, j);
}

// `columns` holds 3 · dim columns, `scores` one per key; `table` the head's relative keys, or
// null.
template <typename T, int64_t Dim>
void forward_tile(const AttentionForward<T>& p, const QueryTile& tile, Lanes<T>* columns,
                  Lanes<T>* scores, DistanceColumns<T>* table) {
  const int64_t dim = dim_of<Dim>(p.shape.head_dim);
  Lanes<T>* q = columns;
  Lanes<T>* acc = columns + dim;
  Lanes<T>* q_position = acc + dim;
  load_queries(p.q, tile, dim, q);
  if (table) load_queries(p.q_position, tile, dim, q_position);
  const Lanes<T> last = last_keys<T>(p.shape, tile);
  const int64_t keys = keys_walked(p.shape, tile);
  const Lanes<T> minus_infinity = broadcast<T>(-std::numeric_limits<T>::infinity());
  Lanes<T> largest = minus_infinity;
  for (int64_t j = 0; j < keys; ++j) {
    const Lanes<T> s = tile_scores(p, tile, q, q_position, table, last, j, dim);
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

// Where the backward of relative positions goes: the head's relative keys and their
// gradient's partial (both DistanceColumns), and q' and ∂q' for the tile (dim columns each).
template <typename T>
struct RelativeTerms {
  DistanceColumns<T>* table;
  DistanceColumns<T>* grad_table;
  Lanes<T>* q_position;
  Lanes<T>* grad_q_position;
};

// The tile's terms of the head's key and value gradients go into per-lane partials,
// grad_keys[j · dim + c] and grad_values[j · dim + c]; those of relative positions, where
// `relative` is given, into its gradients.
template <typename T, int64_t Dim>
void backward_tile(const AttentionBackward<T>& p, const QueryTile& tile, Lanes<T>* columns,
                   Lanes<T>* grad_keys, Lanes<T>* grad_values, const RelativeTerms<T>* relative) {
  const int64_t dim = dim_of<Dim>(p.shape.head_dim);
  Lanes<T>* q = columns;
  Lanes<T>* grad_out = q + dim;
  Lanes<T>* out = grad_out + dim;
  Lanes<T>* grad_q = out + dim;
  load_queries(p.q, tile, dim, q);
  load_queries(p.grad_out, tile, dim, grad_out);
  load_queries(p.out, tile, dim, out);
  if (relative) {
    load_queries(p.q_position, tile, dim, relative->q_position);
    for (int64_t c = 0; c < dim; ++c) relative->grad_q_position[c] = Lanes<T>{};
  }
  const Lanes<T> log_sum_exp = load_lanes(
      p.log_sum_exp + (tile.b * p.shape.heads + tile.h) * p.shape.queries + tile.first, tile.count);
  const Lanes<T> last = last_keys<T>(p.shape, tile);
  const int64_t keys = keys_walked(p.shape, tile);
  // dP_ij = ∂o_i · v_j, then dS_ij = P_ij (dP_ij − ∂o_i · o_i) (times the scale, for ∂q, ∂k).
  Lanes<T> along{};
  for (int64_t c = 0; c < dim; ++c) along += grad_out[c] * out[c];
  for (int64_t c = 0; c < dim; ++c) grad_q[c] = Lanes<T>{};
  for (int64_t j = 0; j < keys; ++j) {
    const T* k = p.k.at(tile.b, tile.h, j);
    const T* v = p.v.at(tile.b, tile.h, j);
    const Lanes<T> s = tile_scores(p, tile, q, relative ? relative->q_position : nullptr,
                                   relative ? relative->table : nullptr, last, j, dim);
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
    if (relative) {
      // Each lane adds into its own distance, so one vector per column. Lanes past the causal
      // mask or past the tile's queries have dS = 0 and add zeros (into the pads, where their
      // distance is out of the table).
      const int64_t distance = first_distance(p.shape, tile, j);
      for (int64_t c = 0; c < dim; ++c) {
        T* r = relative->table->at(c, distance);
        T* grad_r = relative->grad_table->at(c, distance);
        relative->grad_q_position[c] += grad_score * load_lanes(r, kTileRows);
        store_lanes(load_lanes(grad_r, kTileRows) + grad_score * relative->q_position[c], kTileRows,
                    grad_r);
      }
    }
  }
  store_queries(grad_q, tile, dim, p.grad_q);
  if (relative) store_queries(relative->grad_q_position, tile, dim, p.grad_q_position);
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
  const AttentionShape& s = p.shape;
  TileScratch<T> columns(3 * s.head_dim);
  TileScratch<T> scores(s.keys);
  DistanceColumns<T> table(p.relative ? s.keys : 0, s.head_dim);
  with_fixed_dims(s.head_dim, s.head_dim, [&]<int64_t Dim, int64_t>() {
    for (int64_t head = begin; head < end; ++head) {
      if (p.relative)
        table.load(p.relative + head % s.heads * s.keys * s.head_dim, s.keys, s.head_dim);
      for_query_tiles(s, head, [&](const QueryTile& tile) {
        forward_tile<T, Dim>(p, tile, columns.data(), scores.data(), p.relative ? &table : nullptr);
      });
    }
  });
}

template <typename T>
void backward_heads(const AttentionBackward<T>& p, int64_t begin, int64_t end) {
  const AttentionShape& s = p.shape;
  const int64_t per_head = s.keys * s.head_dim;
  TileScratch<T> columns(6 * s.head_dim);
  TileScratch<T> partials(2 * per_head);
  std::vector<T> sums(static_cast<size_t>(2 * per_head));
  const int64_t relative_keys = p.relative ? s.keys : 0;
  DistanceColumns<T> table(relative_keys, s.head_dim), grad_table(relative_keys, s.head_dim);
  const RelativeTerms<T> relative{&table, &grad_table, columns.data() + 4 * s.head_dim,
                                  columns.data() + 5 * s.head_dim};
  with_fixed_dims(s.head_dim, s.head_dim, [&]<int64_t Dim, int64_t>() {
    for (int64_t head = begin; head < end; ++head) {
      Lanes<T>* grad_keys = partials.data();
      Lanes<T>* grad_values = grad_keys + per_head;
      std::fill(grad_keys, grad_keys + 2 * per_head, Lanes<T>{});
      if (p.relative) {
        table.load(p.relative + head % s.heads * per_head, s.keys, s.head_dim);
        std::fill(grad_table.values.begin(), grad_table.values.end(), T(0));
      }
      for_query_tiles(s, head, [&](const QueryTile& tile) {
        backward_tile<T, Dim>(p, tile, columns.data(), grad_keys, grad_values,
                              p.relative ? &relative : nullptr);
      });
      if (p.relative) grad_table.store(p.grad_relative + head * per_head, s.keys, s.head_dim);
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
