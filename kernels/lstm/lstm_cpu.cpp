#include <algorithm>
#include <type_traits>

#include "kernels/common/row_tile.h"
#include "kernels/lstm/lstm.h"

namespace memscript::kernels {

namespace {

// Sixteen batch rows step together, one per vector lane: at the study's sizes a row's state is
// 4 numbers and its gates 16, and a product with W_hh a row at a time is a chain of short
// loops. Each lane evaluates lstm_step's and lstm_backward_row's expressions in the same order,
// so the results are the same bits as one row at a time (and as the CUDA kernel).

// Per lane, the start of its row's step t in a [batch, length, width] array, or of its own
// numbers in a [batch, width] one (length 1, t 0).
template <typename T>
LaneRows<T> lane_rows(T* base, int64_t length, int64_t width, const LaneGroup& g, int64_t t) {
  return memscript::kernels::lane_rows(base + t * width, length * width, g);
}

template <typename T>
void gather(T* base, int64_t length, int64_t width, const LaneGroup& g, int64_t t,
            Lanes<std::remove_const_t<T>>* columns) {
  const LaneRows<T> at = lane_rows(base, length, width, g, t);
  gather_lane_rows<std::remove_const_t<T>>(at.rows, width, columns);
}

template <typename T>
void scatter(const Lanes<T>* columns, T* base, int64_t length, int64_t width, const LaneGroup& g,
             int64_t t) {
  scatter_lane_rows(columns, width, g.count, lane_rows(base, length, width, g, t).rows);
}

template <typename T>
void forward_group(const LstmForward<T>& a, const LstmShape& s, const LaneGroup& g) {
  const int64_t hidden = s.hidden, width = s.gates();
  TileScratch<T> columns(width + 2 * hidden);
  Lanes<T>* z = columns.data();
  Lanes<T>* h = z + width;
  Lanes<T>* c = h + hidden;
  if (a.h0) gather(a.h0, 1, hidden, g, 0, h);
  if (a.c0) gather(a.c0, 1, hidden, g, 0, c);
  for (int64_t t = 0; t < s.length; ++t) {
    gather(a.pre, s.length, width, g, t, z);
    for (int64_t j = 0; j < hidden; ++j) {
      const Lanes<T> h_j = h[j];
      const T* w = a.weight_hh_t + j * width;
      for (int64_t m = 0; m < width; ++m) z[m] += w[m] * h_j;
    }
    for (int64_t slot = 0; slot < 4; ++slot) {
      const GateActivation<T> gate = slot == 2 ? tanh_gate<T>() : sigmoid_gate<T>();
      T* x = tile_numbers<T>(z + slot * hidden);
      for (int64_t j = 0; j < hidden * kTileRows; ++j) x[j] = activate(x[j], gate);
    }
    for (int64_t j = 0; j < hidden; ++j) {
      lstm_cell_state(z, hidden, j, c[j]);
      T* hj = tile_numbers<T>(h + j);
      const T* cj = tile_numbers<T>(c + j);
      const T* oj = tile_numbers<T>(z + 3 * hidden + j);
      for (int64_t r = 0; r < kTileRows; ++r) hj[r] = oj[r] * tanh_of(cj[r]);
    }
    scatter(h, a.outputs, s.length, hidden, g, t);
    if (a.cells) scatter(c, a.cells, s.length, hidden, g, t);
    if (a.gates) scatter(z, a.gates, s.length, width, g, t);
  }
  scatter(h, a.h_last, 1, hidden, g, 0);
  scatter(c, a.c_last, 1, hidden, g, 0);
}

template <typename T>
void backward_group(const LstmBackward<T>& a, const LstmShape& s, const LaneGroup& g) {
  const int64_t hidden = s.hidden, width = s.gates();
  // z, c_t, grad_y, h_{t-1}, c_{t-1}, grad_z, carry_h, carry_c, grad_h, and W_hh's gradient.
  TileScratch<T> columns(2 * width + 7 * hidden + width * hidden);
  Lanes<T>* z = columns.data();
  Lanes<T>* c = z + width;
  Lanes<T>* grad_y = c + hidden;
  Lanes<T>* h_prev = grad_y + hidden;
  Lanes<T>* c_prev = h_prev + hidden;
  Lanes<T>* grad_z = c_prev + hidden;
  Lanes<T>* carry_h = grad_z + width;
  Lanes<T>* carry_c = carry_h + hidden;
  Lanes<T>* grad_h = carry_c + hidden;
  Lanes<T>* grad_w = grad_h + hidden;
  if (a.grad_h_last) gather(a.grad_h_last, 1, hidden, g, 0, carry_h);
  if (a.grad_c_last) gather(a.grad_c_last, 1, hidden, g, 0, carry_c);
  for (int64_t t = s.length - 1; t >= 0; --t) {
    gather(a.gates, s.length, width, g, t, z);
    gather(a.cells, s.length, hidden, g, t, c);
    gather(a.grad_outputs, s.length, hidden, g, t, grad_y);
    if (t > 0) {
      gather(a.outputs, s.length, hidden, g, t - 1, h_prev);
      gather(a.cells, s.length, hidden, g, t - 1, c_prev);
    } else {
      if (a.h0) {
        gather(a.h0, 1, hidden, g, 0, h_prev);
      } else {
        std::fill(h_prev, h_prev + hidden, Lanes<T>{});
      }
      if (a.c0) {
        gather(a.c0, 1, hidden, g, 0, c_prev);
      } else {
        std::fill(c_prev, c_prev + hidden, Lanes<T>{});
      }
    }
    for (int64_t j = 0; j < hidden; ++j) {
      Lanes<T> tanh_c{};  // every lane is set below; GCC 13 cannot tell
      for (int64_t r = 0; r < kTileRows; ++r) tanh_c[r] = tanh_of(c[j][r]);
      lstm_cell_backward_of_tanh(z, tanh_c, c_prev[j], grad_y[j] + carry_h[j], hidden, j, grad_z,
                                 carry_c[j]);
      grad_h[j] = Lanes<T>{};
    }
    for (int64_t m = 0; m < width; ++m) {
      const Lanes<T> g_m = grad_z[m];
      const T* w = a.weight_hh + m * hidden;
      Lanes<T>* gw = grad_w + m * hidden;
      for (int64_t j = 0; j < hidden; ++j) grad_h[j] += w[j] * g_m;
      for (int64_t j = 0; j < hidden; ++j) gw[j] += g_m * h_prev[j];
    }
    std::copy(grad_h, grad_h + hidden, carry_h);
    scatter(grad_z, a.grad_pre, s.length, width, g, t);
  }
  scatter(grad_w, a.grad_weight_hh, 1, width * hidden, g, 0);
  if (a.grad_h0) scatter(carry_h, a.grad_h0, 1, hidden, g, 0);
  if (a.grad_c0) scatter(carry_c, a.grad_c0, 1, hidden, g, 0);
}

template <typename T>
void forward_rows(const LstmForward<T>& a, const LstmShape& s, int64_t begin, int64_t end) {
  for_lane_groups(begin, end, [&](const LaneGroup& g) { forward_group(a, s, g); });
}

template <typename T>
void backward_rows(const LstmBackward<T>& a, const LstmShape& s, int64_t begin, int64_t end) {
  for_lane_groups(begin, end, [&](const LaneGroup& g) { backward_group(a, s, g); });
}

}  // namespace

void lstm_forward_cpu(const LstmForward<float>& a, LstmShape s, int64_t begin, int64_t end) {
  forward_rows(a, s, begin, end);
}
void lstm_forward_cpu(const LstmForward<double>& a, LstmShape s, int64_t begin, int64_t end) {
  forward_rows(a, s, begin, end);
}
void lstm_backward_cpu(const LstmBackward<float>& a, LstmShape s, int64_t begin, int64_t end) {
  backward_rows(a, s, begin, end);
}
void lstm_backward_cpu(const LstmBackward<double>& a, LstmShape s, int64_t begin, int64_t end) {
  backward_rows(a, s, begin, end);
}

}  // namespace memscript::kernels
