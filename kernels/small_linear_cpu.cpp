#include "small_linear.h"

#include <algorithm>
#include <vector>

namespace memscript::kernels {

namespace {

// out[r, :] = init + Σ_k a[r, k] · b[k, :] for rows [begin, end), with a: [rows, depth],
// b: [depth, width], out: [rows, width], init: [width] or null. The forward (a = x, b = Wᵀ)
// and grad_x (a = grad_y, b = W) are both this product.
//
// With the width known at compile time the row's accumulator lives in vector registers across
// the whole sum; a width read at run time kept it in memory, and every step waited for the
// previous one's store (most of the time at width 4).
template <typename T, int64_t Width>
void rows_times_matrix_fixed(const T* __restrict a, const T* __restrict b, const T* __restrict init,
                             T* __restrict out, int64_t depth, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    T acc[Width];
    for (int64_t j = 0; j < Width; ++j) acc[j] = init ? init[j] : T(0);
    const T* a_row = a + r * depth;
    for (int64_t k = 0; k < depth; ++k) {
      const T ak = a_row[k];
      const T* b_row = b + k * Width;
      for (int64_t j = 0; j < Width; ++j) acc[j] += ak * b_row[j];
    }
    std::copy(acc, acc + Width, out + r * Width);
  }
}

template <typename T>
void rows_times_matrix_any(const T* __restrict a, const T* __restrict b, const T* __restrict init,
                           T* __restrict out, int64_t depth, int64_t width, int64_t begin,
                           int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    T* __restrict row = out + r * width;
    for (int64_t j = 0; j < width; ++j) row[j] = init ? init[j] : T(0);
    const T* a_row = a + r * depth;
    for (int64_t k = 0; k < depth; ++k) {
      const T ak = a_row[k];
      const T* b_row = b + k * width;
      for (int64_t j = 0; j < width; ++j) row[j] += ak * b_row[j];
    }
  }
}

template <typename T>
void rows_times_matrix(const T* a, const T* b, const T* init, T* out, int64_t depth, int64_t width,
                       int64_t begin, int64_t end) {
  switch (width) {
    case 1:
      return rows_times_matrix_fixed<T, 1>(a, b, init, out, depth, begin, end);
    case 2:
      return rows_times_matrix_fixed<T, 2>(a, b, init, out, depth, begin, end);
    case 3:
      return rows_times_matrix_fixed<T, 3>(a, b, init, out, depth, begin, end);
    case 4:
      return rows_times_matrix_fixed<T, 4>(a, b, init, out, depth, begin, end);
    case 8:
      return rows_times_matrix_fixed<T, 8>(a, b, init, out, depth, begin, end);
    case 16:
      return rows_times_matrix_fixed<T, 16>(a, b, init, out, depth, begin, end);
    case 32:
      return rows_times_matrix_fixed<T, 32>(a, b, init, out, depth, begin, end);
    case 64:
      return rows_times_matrix_fixed<T, 64>(a, b, init, out, depth, begin, end);
    default:
      return rows_times_matrix_any(a, b, init, out, depth, width, begin, end);
  }
}

template <typename T>
void forward(const T* x, const T* weight, const T* bias, T* y, SmallLinearShape s, int64_t begin,
             int64_t end) {
  // Wᵀ, so that each input feature adds one contiguous row to y's row.
  std::vector<T> transposed(static_cast<size_t>(s.in * s.out));
  for (int64_t o = 0; o < s.out; ++o) {
    for (int64_t i = 0; i < s.in; ++i) transposed[i * s.out + o] = weight[o * s.in + i];
  }
  rows_times_matrix(x, transposed.data(), bias, y, s.in, s.out, begin, end);
}

// sum[:] = Σ_r weight[r · stride] · rows[r, :] over rows [first, last) of a [rows, Width]
// array, the sum in registers (see rows_times_matrix_fixed). One row of a block's grad_W
// partial (weight = a column of grad_y), or with weight null the block's grad_b partial.
template <typename T, int64_t Width>
void weighted_row_sum_fixed(const T* __restrict weight, int64_t stride, const T* __restrict rows,
                            int64_t first, int64_t last, T* __restrict sum) {
  T acc[Width] = {};
  for (int64_t r = first; r < last; ++r) {
    const T w = weight ? weight[r * stride] : T(1);
    const T* row = rows + r * Width;
    for (int64_t j = 0; j < Width; ++j) acc[j] += w * row[j];
  }
  std::copy(acc, acc + Width, sum);
}

template <typename T>
void weighted_row_sum_any(const T* __restrict weight, int64_t stride, const T* __restrict rows,
                          int64_t width, int64_t first, int64_t last, T* __restrict sum) {
  std::fill(sum, sum + width, T(0));
  for (int64_t r = first; r < last; ++r) {
    const T w = weight ? weight[r * stride] : T(1);
    const T* row = rows + r * width;
    for (int64_t j = 0; j < width; ++j) sum[j] += w * row[j];
  }
}

template <typename T>
void weighted_row_sum(const T* weight, int64_t stride, const T* rows, int64_t width, int64_t first,
                      int64_t last, T* sum) {
  switch (width) {
    case 1:
      return weighted_row_sum_fixed<T, 1>(weight, stride, rows, first, last, sum);
    case 2:
      return weighted_row_sum_fixed<T, 2>(weight, stride, rows, first, last, sum);
    case 3:
      return weighted_row_sum_fixed<T, 3>(weight, stride, rows, first, last, sum);
    case 4:
      return weighted_row_sum_fixed<T, 4>(weight, stride, rows, first, last, sum);
    case 8:
      return weighted_row_sum_fixed<T, 8>(weight, stride, rows, first, last, sum);
    case 16:
      return weighted_row_sum_fixed<T, 16>(weight, stride, rows, first, last, sum);
    case 32:
      return weighted_row_sum_fixed<T, 32>(weight, stride, rows, first, last, sum);
    case 64:
      return weighted_row_sum_fixed<T, 64>(weight, stride, rows, first, last, sum);
    default:
      return weighted_row_sum_any(weight, stride, rows, width, first, last, sum);
  }
}

// acc[i, :] += x[r, i] · g[r, :] over rows [first, last): Gᵀ x transposed, [in, Width], with
// the gradient rows (Width = out) as the vector dimension; the sum over rows is in row order.
template <typename T, int64_t Width>
void outer_product_sum_fixed(const T* __restrict g, const T* __restrict x, int64_t in,
                             int64_t first, int64_t last, T* __restrict acc) {
  std::fill(acc, acc + in * Width, T(0));
  for (int64_t r = first; r < last; ++r) {
    const T* g_row = g + r * Width;
    for (int64_t i = 0; i < in; ++i) {
      const T xi = x[r * in + i];
      T* acc_row = acc + i * Width;
      for (int64_t j = 0; j < Width; ++j) acc_row[j] += g_row[j] * xi;
    }
  }
}

template <typename T>
void grad_params(const T* grad_y, const T* x, T* weight_partials, T* bias_partials,
                 SmallLinearShape s, int64_t begin, int64_t end) {
  std::vector<T> transposed(static_cast<size_t>(s.in * s.out));
  for (int64_t b = begin; b < end; ++b) {
    const int64_t first = b * kSmallLinearRowsPerBlock;
    const int64_t last = std::min(s.rows, first + kSmallLinearRowsPerBlock);
    T* gw = weight_partials + b * s.out * s.in;
    bool summed = true;
    switch (s.out) {
      case 2:
        outer_product_sum_fixed<T, 2>(grad_y, x, s.in, first, last, transposed.data());
        break;
      case 4:
        outer_product_sum_fixed<T, 4>(grad_y, x, s.in, first, last, transposed.data());
        break;
      case 8:
        outer_product_sum_fixed<T, 8>(grad_y, x, s.in, first, last, transposed.data());
        break;
      case 16:
        outer_product_sum_fixed<T, 16>(grad_y, x, s.in, first, last, transposed.data());
        break;
      case 32:
        outer_product_sum_fixed<T, 32>(grad_y, x, s.in, first, last, transposed.data());
        break;
      default:
        summed = false;
    }
    if (summed) {
      for (int64_t o = 0; o < s.out; ++o) {
        for (int64_t i = 0; i < s.in; ++i) gw[o * s.in + i] = transposed[i * s.out + o];
      }
    } else {
      for (int64_t o = 0; o < s.out; ++o)
        weighted_row_sum(grad_y + o, s.out, x, s.in, first, last, gw + o * s.in);
    }
    if (bias_partials)
      weighted_row_sum<T>(nullptr, 0, grad_y, s.out, first, last, bias_partials + b * s.out);
  }
}

}  // namespace

void small_linear_forward_cpu(const float* x, const float* weight, const float* bias, float* y,
                              SmallLinearShape shape, int64_t begin, int64_t end) {
  forward(x, weight, bias, y, shape, begin, end);
}
void small_linear_forward_cpu(const double* x, const double* weight, const double* bias, double* y,
                              SmallLinearShape shape, int64_t begin, int64_t end) {
  forward(x, weight, bias, y, shape, begin, end);
}
void small_linear_grad_input_cpu(const float* grad_y, const float* weight, float* grad_x,
                                 SmallLinearShape shape, int64_t begin, int64_t end) {
  rows_times_matrix<float>(grad_y, weight, nullptr, grad_x, shape.out, shape.in, begin, end);
}
void small_linear_grad_input_cpu(const double* grad_y, const double* weight, double* grad_x,
                                 SmallLinearShape shape, int64_t begin, int64_t end) {
  rows_times_matrix<double>(grad_y, weight, nullptr, grad_x, shape.out, shape.in, begin, end);
}
void small_linear_grad_params_cpu(const float* grad_y, const float* x, float* weight_partials,
                                  float* bias_partials, SmallLinearShape shape, int64_t begin,
                                  int64_t end) {
  grad_params(grad_y, x, weight_partials, bias_partials, shape, begin, end);
}
void small_linear_grad_params_cpu(const double* grad_y, const double* x, double* weight_partials,
                                  double* bias_partials, SmallLinearShape shape, int64_t begin,
                                  int64_t end) {
  grad_params(grad_y, x, weight_partials, bias_partials, shape, begin, end);
}

}  // namespace memscript::kernels
