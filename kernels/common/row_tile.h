#pragma once

// Row tiles: how the CPU kernels vectorize rows that are only a few numbers wide.
//
// The decoder's activations are [rows, width] with width 4 to 64. A loop along one such row is
// too short to fill a vector register, and a sum along it (a layer norm's mean, a dot product)
// is a chain of dependent additions that strict floating point may not reorder. A tile holds
// kTileRows rows transposed, feature-major: tile[c] is column c of the tile's rows, one vector
// (GCC's vector extension) with one row per lane. Every operation on tiles is then a loop over
// columns whose body is one vector instruction (two or four where the registers are narrower),
// and each lane does exactly what a scalar loop over its row would do, in the same order. So a
// row's result does not depend on which tile or lane it went through, and sums over rows (the
// parameter gradients) add each lane's partial in a fixed order: the same bits for any split of
// the rows over threads.
//
// Rows past the end of the array load as zeros, so a partial last tile needs no special case in
// sums over rows as long as a zero row adds nothing to them (true of every kernel here: each such
// sum has a factor of the row's input or of its gradient, both zero).
//
// CPU only (nvcc never sees it). The transposes between rows and tiles are written as plain
// loops over a compile-time number of columns, which the compiler turns into register permutes.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/fast_exp.h"
#include "kernels/common/lanes.h"

namespace memscript::kernels {

// Zeroed memory for `columns` tile columns, aligned as Lanes<T> must be. (A std::vector of
// Lanes<T> itself would drop the type's attributes.)
template <typename T>
class TileScratch {
 public:
  explicit TileScratch(int64_t columns) : storage_(static_cast<size_t>(columns)) {}
  Lanes<T>* data() { return reinterpret_cast<Lanes<T>*>(storage_.data()); }

 private:
  struct alignas(sizeof(Lanes<T>)) Column {
    T lanes[kTileRows];
  };
  std::vector<Column> storage_;
};

// The numbers of `columns` columns as one flat array (column after column), for elementwise
// loops that need no lane structure.
template <typename T>
inline T* tile_numbers(Lanes<T>* columns) {
  return reinterpret_cast<T*>(columns);
}
template <typename T>
inline const T* tile_numbers(const Lanes<T>* columns) {
  return reinterpret_cast<const T*>(columns);
}

// exp_of (fast_exp.h) on every lane: its float body instantiated on the vector type, so the
// same bits lane by lane, and inlined into the loops that call it. 2^k goes into the exponent
// bits as in fast_exp.h (casts between vector types of one size keep the bits).
struct LanesTimesPowerOfTwo {
  Lanes<float> operator()(Lanes<float> p, Lanes<float> shifted) const {
    typedef uint32_t Bits __attribute__((vector_size(sizeof(Lanes<float>))));
    const Bits exponent =
        (Bits)shifted - fast_exp_detail::bits_as<uint32_t>(fast_exp_detail::kShift);
    return (Lanes<float>)((Bits)p + (exponent << 23));
  }
};
inline Lanes<float> exp_lanes(Lanes<float> x) {
  return fast_exp_detail::exp_float(x, LanesTimesPowerOfTwo{});
}
inline Lanes<double> exp_lanes(Lanes<double> x) {
  Lanes<double> y;
  for (int64_t r = 0; r < kTileRows; ++r) y[r] = exp_of(x[r]);
  return y;
}

// Every lane `value`.
template <typename T>
inline Lanes<T> broadcast(T value) {
  return Lanes<T>{} + value;
}

namespace row_tile_detail {

// A full tile of Width columns from 16 packed rows ([kTileRows][Width], contiguous) and back:
// with every size known at compile time these become register permutes.
template <int64_t Width, typename T>
inline void packed_rows_to_tile(const T* __restrict packed, Lanes<T>* __restrict tile) {
  for (int64_t r = 0; r < kTileRows; ++r) {
    for (int64_t c = 0; c < Width; ++c) tile[c][r] = packed[r * Width + c];
  }
}
template <int64_t Width, typename T>
inline void tile_to_packed_rows(const Lanes<T>* __restrict tile, T* __restrict packed) {
  for (int64_t r = 0; r < kTileRows; ++r) {
    for (int64_t c = 0; c < Width; ++c) packed[r * Width + c] = tile[c][r];
  }
}

// kTileRows numbers from `packed` as one column.
template <typename T>
inline Lanes<T> lanes_at(const T* packed) {
  Lanes<T> v;
  std::memcpy(&v, packed, sizeof v);
  return v;
}

// Columns [0, Width) of `count` rows (row stride `stride`) into tile[0 … Width). Rows that are
// not packed (stride > Width) are packed first, a vector copy each, so that the transpose is the
// compile-time one.
template <int64_t Width, typename T>
inline void load_columns(const T* __restrict rows, int64_t stride, int64_t count,
                         Lanes<T>* __restrict tile) {
  if (count == kTileRows && stride == Width) return packed_rows_to_tile<Width>(rows, tile);
  T packed[kTileRows * Width] = {};
  for (int64_t r = 0; r < count; ++r)
    std::copy(rows + r * stride, rows + r * stride + Width, packed + r * Width);
  packed_rows_to_tile<Width>(packed, tile);
}

template <int64_t Width, typename T>
inline void store_columns(const Lanes<T>* __restrict tile, int64_t count, T* __restrict rows,
                          int64_t stride) {
  if (count == kTileRows && stride == Width) return tile_to_packed_rows<Width>(tile, rows);
  T packed[kTileRows * Width];
  tile_to_packed_rows<Width>(tile, packed);
  for (int64_t r = 0; r < count; ++r)
    std::copy(packed + r * Width, packed + (r + 1) * Width, rows + r * stride);
}

// Calls move<W>(column) for column blocks of compile-time widths 16, 8, 4, 2, 1 that cover
// [0, width): any width transposes through permutes of at most five shapes.
template <typename Move>
inline void for_column_blocks(int64_t width, Move&& move) {
  int64_t c = 0;
  for (; c + 16 <= width; c += 16) move.template operator()<16>(c);
  if (c + 8 <= width) move.template operator()<8>(c), c += 8;
  if (c + 4 <= width) move.template operator()<4>(c), c += 4;
  if (c + 2 <= width) move.template operator()<2>(c), c += 2;
  if (c < width) move.template operator()<1>(c);
}

template <typename T, int64_t N>
struct VectorOf {
  typedef T type __attribute__((vector_size(N * sizeof(T))));
};

template <typename V, size_t... I>
inline auto concat(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, I...);
}

// Numbers [c, c + W) of rows[0 … Rows) side by side in one vector, built in registers: a
// vector load read back from numbers just stored one row at a time waits for those stores to
// reach the cache (no store forwarding across sizes), and behind them every earlier store.
template <typename T, int64_t W, int64_t Rows>
inline typename VectorOf<T, W * Rows>::type concat_rows(const T* const* rows, int64_t c) {
  if constexpr (Rows == 1) {
    typename VectorOf<T, W>::type v;
    std::memcpy(&v, rows[0] + c, sizeof v);
    return v;
  } else {
    return concat(concat_rows<T, W, Rows / 2>(rows, c),
                  concat_rows<T, W, Rows / 2>(rows + Rows / 2, c),
                  std::make_index_sequence<W * Rows>());
  }
}

}  // namespace row_tile_detail

// One number per row for the first `count` rows: as a column (zeros past count), and back.
// (A whole column is copied with a size known at compile time: one vector load or store
// rather than a library call.)
template <typename T>
inline Lanes<T> load_lanes(const T* values, int64_t count) {
  Lanes<T> v{};
  if (count == kTileRows) {
    std::memcpy(&v, values, sizeof v);
  } else {
    std::memcpy(&v, values, static_cast<size_t>(count) * sizeof(T));
  }
  return v;
}
template <typename T>
inline void store_lanes(const Lanes<T>& v, int64_t count, T* values) {
  if (count == kTileRows) {
    std::memcpy(values, &v, sizeof v);
  } else {
    std::memcpy(values, &v, static_cast<size_t>(count) * sizeof(T));
  }
}

// Rows [0, count) of a [rows, width] array with row stride `stride` into tile[0 … width); lanes
// count … kTileRows − 1 are zero.
template <typename T>
inline void load_tile(const T* rows, int64_t width, int64_t stride, int64_t count, Lanes<T>* tile) {
  row_tile_detail::for_column_blocks(width, [&]<int64_t W>(int64_t c) {
    row_tile_detail::load_columns<W, T>(rows + c, stride, count, tile + c);
  });
}

// The first `count` lanes of tile[0 … width) back into rows of stride `stride`.
template <typename T>
inline void store_tile(const Lanes<T>* tile, int64_t width, int64_t count, T* rows,
                       int64_t stride) {
  row_tile_detail::for_column_blocks(width, [&]<int64_t W>(int64_t c) {
    row_tile_detail::store_columns<W, T>(tile + c, count, rows + c, stride);
  });
}

// Items (batch rows, heads, channels) [first, first + count), count ≤ kTileRows, stepped side by
// side one per vector lane. Lanes past `count` repeat the first item, so that they read valid
// memory; they are never written back (scatter_lane_rows takes `count`).
struct LaneGroup {
  int64_t first;
  int64_t count;

  int64_t item(int64_t lane) const { return first + (lane < count ? lane : 0); }
};

// Calls body(LaneGroup) for groups of up to kTileRows items of [begin, end).
template <typename F>
inline void for_lane_groups(int64_t begin, int64_t end, F&& body) {
  for (int64_t first = begin; first < end; first += kTileRows)
    body(LaneGroup{first, end - first < kTileRows ? end - first : kTileRows});
}

// Per lane, where its item's numbers start: what gather_lane_rows and scatter_lane_rows take.
template <typename T>
struct LaneRows {
  T* rows[kTileRows];
};

// Per lane, base + item · stride.
template <typename T>
inline LaneRows<T> lane_rows(T* base, int64_t stride, const LaneGroup& group) {
  LaneRows<T> at;
  for (int64_t l = 0; l < kTileRows; ++l) at.rows[l] = base + group.item(l) * stride;
  return at;
}

// Lanes whose rows lie anywhere: columns[c][l] = rows[l][c] for c < width, every lane (a row
// pointer each; lanes a caller does not use may repeat a valid row). Copies each lane's row in
// column blocks of compile-time widths, then transposes them with register permutes.
template <typename T>
inline void gather_lane_rows(const T* const* rows, int64_t width, Lanes<T>* columns) {
  row_tile_detail::for_column_blocks(width, [&]<int64_t W>(int64_t c) {
    constexpr int64_t kRowsPerVector = kTileRows / W;
    Lanes<T> packed[W];
    for (int64_t v = 0; v < W; ++v)
      packed[v] = row_tile_detail::concat_rows<T, W, kRowsPerVector>(rows + v * kRowsPerVector, c);
    row_tile_detail::packed_rows_to_tile<W>(tile_numbers<T>(packed), columns + c);
  });
}

// The inverse of gather_lane_rows for the first `count` lanes.
template <typename T>
inline void scatter_lane_rows(const Lanes<T>* columns, int64_t width, int64_t count,
                              T* const* rows) {
  row_tile_detail::for_column_blocks(width, [&]<int64_t W>(int64_t c) {
    T packed[kTileRows * W];
    row_tile_detail::tile_to_packed_rows<W>(columns + c, packed);
    for (int64_t l = 0; l < count; ++l)
      std::copy(packed + l * W, packed + (l + 1) * W, rows[l] + c);
  });
}

// y[o] = bias[o] + Σ_i weight[o, i] · x[i] (the sum in order of i): x [in], y [out] columns,
// weight [out, in] row-major, bias [out] or null. Four outputs at a time share each x[i] load.
template <typename T>
inline void tile_linear(const Lanes<T>* __restrict x, int64_t in, const T* __restrict weight,
                        const T* __restrict bias, int64_t out, Lanes<T>* __restrict y) {
  const auto start = [&](int64_t o) { return broadcast<T>(bias ? bias[o] : T(0)); };
  int64_t o = 0;
  for (; o + 4 <= out; o += 4) {
    Lanes<T> a0 = start(o), a1 = start(o + 1), a2 = start(o + 2), a3 = start(o + 3);
    const T* w = weight + o * in;
    for (int64_t i = 0; i < in; ++i) {
      const Lanes<T> xi = x[i];
      a0 += w[i] * xi;
      a1 += w[in + i] * xi;
      a2 += w[2 * in + i] * xi;
      a3 += w[3 * in + i] * xi;
    }
    y[o] = a0;
    y[o + 1] = a1;
    y[o + 2] = a2;
    y[o + 3] = a3;
  }
  for (; o < out; ++o) {
    Lanes<T> a = start(o);
    for (int64_t i = 0; i < in; ++i) a += weight[o * in + i] * x[i];
    y[o] = a;
  }
}

// x[i] = Σ_o weight[o, i] · g[o] (in order of o): the gradient through tile_linear to its input.
template <typename T>
inline void tile_linear_backward_input(const Lanes<T>* __restrict g, int64_t out,
                                       const T* __restrict weight, int64_t in,
                                       Lanes<T>* __restrict x) {
  int64_t i = 0;
  for (; i + 4 <= in; i += 4) {
    Lanes<T> a0{}, a1{}, a2{}, a3{};
    for (int64_t o = 0; o < out; ++o) {
      const Lanes<T> go = g[o];
      const T* w = weight + o * in + i;
      a0 += w[0] * go;
      a1 += w[1] * go;
      a2 += w[2] * go;
      a3 += w[3] * go;
    }
    x[i] = a0;
    x[i + 1] = a1;
    x[i + 2] = a2;
    x[i + 3] = a3;
  }
  for (; i < in; ++i) {
    Lanes<T> a{};
    for (int64_t o = 0; o < out; ++o) a += weight[o * in + i] * g[o];
    x[i] = a;
  }
}

// sum[j] = the lanes of acc[j] added in lane order, for j < count. Sixteen columns at a time
// are transposed so that their lanes are added as whole vectors (one addition per lane instead
// of a chain of scalar ones per column); the order of each column's additions is the same.
template <typename T>
inline void sum_lanes(const Lanes<T>* __restrict acc, int64_t count, T* __restrict sum) {
  static_assert(kTileRows == 16);
  int64_t j = 0;
  for (; j + 16 <= count; j += 16) {
    T packed[kTileRows * 16];
    row_tile_detail::tile_to_packed_rows<16>(acc + j, packed);  // packed[lane · 16 + column]
    Lanes<T> total = row_tile_detail::lanes_at<T>(packed);
    for (int64_t r = 1; r < kTileRows; ++r) total += row_tile_detail::lanes_at<T>(packed + r * 16);
    for (int64_t c = 0; c < 16; ++c) sum[j + c] = total[c];
  }
  for (; j < count; ++j) {
    T s = acc[j][0];
    for (int64_t r = 1; r < kTileRows; ++r) s += acc[j][r];
    sum[j] = s;
  }
}

namespace row_tile_detail {

// may_alias: read in place from a tile's numbers (a copy through memcpy went through the stack
// in halves, and a vector read back from two half-size stores waits for them to reach the
// cache).
typedef float Float8 __attribute__((vector_size(32), __may_alias__));

// out[r][c] = in[c][r] for an 8 x 8 block of floats, in registers (on AVX: unpacks, in-lane
// shuffles, then swaps of 128-bit halves).
inline void transpose8(const Float8* in, Float8* out) {
  Float8 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = __builtin_shufflevector(in[2 * i], in[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[2 * i + 1] = __builtin_shufflevector(in[2 * i], in[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 2; ++i) {
    for (int odd = 0; odd < 2; ++odd) {
      const Float8 a = t[4 * i + odd], b = t[4 * i + odd + 2];
      u[4 * i + 2 * odd] = __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
      u[4 * i + 2 * odd + 1] = __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int r = 0; r < 4; ++r) {
    out[r] = __builtin_shufflevector(u[r], u[r + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    out[r + 4] = __builtin_shufflevector(u[r], u[r + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

}  // namespace row_tile_detail

// sum[j] += terms[j][0], then += terms[j][1], … up to lane count − 1, for j < width: a sum over
// rows kept in row order when the rows went through a tile's lanes. Each column's additions are
// scalar ones in lane order; for float, eight columns at a time are transposed in registers so
// that the eight additions of one lane are one vector addition.
template <typename T>
inline void add_lanes_in_order(const Lanes<T>* __restrict terms, int64_t width, int64_t count,
                               T* __restrict sum) {
  int64_t whole = 0;  // columns done eight at a time (a separate bound: GCC then sees the tail)
  if constexpr (std::is_same_v<T, float>) {
    using row_tile_detail::Float8;
    static_assert(kTileRows == 16);
    const float* numbers = tile_numbers<float>(terms);  // [width][kTileRows]
    whole = width / 8 * 8;
    for (int64_t j = 0; j < whole; j += 8) {
      Float8 rows[kTileRows];
      for (int64_t half = 0; half < 2; ++half) {
        Float8 columns[8];
        // 32-byte aligned: a tile is aligned as Lanes<float> (64 bytes), its columns 64 apart.
        for (int64_t c = 0; c < 8; ++c) {
          columns[c] = *reinterpret_cast<const Float8*>(numbers + (j + c) * kTileRows + half * 8);
        }
        row_tile_detail::transpose8(columns, rows + half * 8);
      }
      Float8 total;
      std::memcpy(&total, sum + j, sizeof total);
      for (int64_t r = 0; r < count; ++r) total += rows[r];
      std::memcpy(sum + j, &total, sizeof total);
    }
  }
  for (int64_t j = whole; j < width; ++j) {
    T s = sum[j];
    for (int64_t r = 0; r < count; ++r) s += terms[j][r];
    sum[j] = s;
  }
}

// A group of `columns` columns in each of several tiles: tile t's group starts at
// first + t · stride (stride = columns when the tiles are packed one after another).
template <typename T>
struct TileSeries {
  const Lanes<T>* first;
  int64_t columns;
  int64_t stride;

  const Lanes<T>* tile(int64_t t) const { return first + t * stride; }
};

// partial[o · in + i] = Σ_rows g[o] · x[i] over the first `tiles` tiles of g (out = g.columns)
// and x (in = x.columns): a weight gradient's share from those rows. Each lane sums its rows in
// tile order, then the lanes are added in lane order. Four outputs at a time share each x load.
// `scratch` holds out · in columns.
template <typename T>
inline void tile_weight_gradient(const TileSeries<T>& g, const TileSeries<T>& x, int64_t tiles,
                                 Lanes<T>* __restrict scratch, T* __restrict partial) {
  const int64_t out = g.columns, in = x.columns;
  for (int64_t i = 0; i < in; ++i) {
    int64_t o = 0;
    for (; o + 4 <= out; o += 4) {
      Lanes<T> a0{}, a1{}, a2{}, a3{};
      for (int64_t t = 0; t < tiles; ++t) {
        const Lanes<T> xi = x.tile(t)[i];
        const Lanes<T>* gt = g.tile(t) + o;
        a0 += gt[0] * xi;
        a1 += gt[1] * xi;
        a2 += gt[2] * xi;
        a3 += gt[3] * xi;
      }
      scratch[o * in + i] = a0;
      scratch[(o + 1) * in + i] = a1;
      scratch[(o + 2) * in + i] = a2;
      scratch[(o + 3) * in + i] = a3;
    }
    for (; o < out; ++o) {
      Lanes<T> a{};
      for (int64_t t = 0; t < tiles; ++t) a += g.tile(t)[o] * x.tile(t)[i];
      scratch[o * in + i] = a;
    }
  }
  sum_lanes(scratch, out * in, partial);
}

// partial[j] = Σ_rows g[j] over the first `tiles` tiles of g: a bias gradient's share, summed
// as tile_weight_gradient sums. `scratch` holds g.columns columns.
template <typename T>
inline void tile_column_sums(const TileSeries<T>& g, int64_t tiles, Lanes<T>* __restrict scratch,
                             T* __restrict partial) {
  for (int64_t j = 0; j < g.columns; ++j) {
    Lanes<T> a{};
    for (int64_t t = 0; t < tiles; ++t) a += g.tile(t)[j];
    scratch[j] = a;
  }
  sum_lanes(scratch, g.columns, partial);
}

}  // namespace memscript::kernels
