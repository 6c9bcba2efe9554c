#include <vector>

#include "kernels/common/channel_groups.h"
#include "kernels/complex_scan/complex_scan.h"

namespace memscript::kernels {

namespace {

// The recurrence over a chunk's steps: h = λ h + b per lane, each state written to h_re, h_im.
template <typename T>
void step_forward(const T* __restrict lr, const T* __restrict li, const T* __restrict b_re,
                  const T* __restrict b_im, T* __restrict re, T* __restrict im, T* __restrict h_re,
                  T* __restrict h_im, int64_t steps, int64_t lanes) {
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t at = t * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      const T next_re = lr[l] * re[l] - li[l] * im[l] + b_re[at + l];
      im[l] = li[l] * re[l] + lr[l] * im[l] + b_im[at + l];
      re[l] = next_re;
      h_re[at + l] = re[l];
      h_im[at + l] = im[l];
    }
  }
}

// The chunk's steps in reverse: G = g + carry (written over g), the λ sums, and the carry
// conj(λ) · G into the step before.
template <typename T>
void step_backward(const T* __restrict lr, const T* __restrict li, const T* __restrict prev_re,
                   const T* __restrict prev_im, T* __restrict G_re, T* __restrict G_im,
                   T* __restrict carry_re, T* __restrict carry_im, T* __restrict sum_re,
                   T* __restrict sum_im, int64_t steps, int64_t lanes) {
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t at = t * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      const T gr = G_re[at + l] + carry_re[l];
      const T gi = G_im[at + l] + carry_im[l];
      const T pr = prev_re[at + l], pi = prev_im[at + l];
      G_re[at + l] = gr;
      G_im[at + l] = gi;
      sum_re[l] += gr * pr + gi * pi;
      sum_im[l] += gi * pr - gr * pi;
      carry_re[l] = lr[l] * gr + li[l] * gi;
      carry_im[l] = lr[l] * gi - li[l] * gr;
    }
  }
}

// complex_scan_channel for every lane of a group of batch rows (channel_groups.h).
template <typename T>
void forward_group(const ComplexScanForward<T>& f, const ComplexScanShape& shape,
                   const ChannelGroup& group) {
  const int64_t lanes = group.lanes(), length = shape.length;
  const std::vector<T> lr = per_lane(f.lambda_re, group), li = per_lane(f.lambda_im, group);
  std::vector<T> re = group_values(f.h0_re, group), im = group_values(f.h0_im, group);
  ChunkArrays<T> chunk(4, lanes);
  T *b_re = chunk[0], *b_im = chunk[1], *h_re = chunk[2], *h_im = chunk[3];
  const int64_t ahead = chunk_ahead(length, false);
  for_chunks(length, [&](int64_t t0, int64_t steps) {
    gather_chunk(f.b_re, length, group, t0, steps, b_re, ahead);
    gather_chunk(f.b_im, length, group, t0, steps, b_im, ahead);
    step_forward(lr.data(), li.data(), b_re, b_im, re.data(), im.data(), h_re, h_im, steps, lanes);
    scatter_chunk(h_re, length, group, t0, steps, f.h_re, ahead);
    scatter_chunk(h_im, length, group, t0, steps, f.h_im, ahead);
  });
  store_group_values(re, group, f.last_re);
  store_group_values(im, group, f.last_im);
}

// complex_scan_backward_channel for every lane of a group.
template <typename T>
void backward_group(const ComplexScanBackward<T>& g, const ComplexScanShape& shape,
                    const ChannelGroup& group) {
  const int64_t lanes = group.lanes(), length = shape.length;
  const std::vector<T> lr = per_lane(g.lambda_re, group), li = per_lane(g.lambda_im, group);
  const std::vector<T> h0_re = group_values(g.h0_re, group), h0_im = group_values(g.h0_im, group);
  std::vector<T> carry_re = group_values(g.grad_last_re, group);
  std::vector<T> carry_im = group_values(g.grad_last_im, group);
  std::vector<T> sum_re(static_cast<size_t>(lanes), T(0)), sum_im(sum_re);
  ChunkArrays<T> chunk(4, lanes);
  ChunkStates<T> states_re(lanes), states_im(lanes);
  T *G_re = chunk[0], *G_im = chunk[1], *prev_re = chunk[2], *prev_im = chunk[3];
  const int64_t ahead = chunk_ahead(length, true);
  for_chunks_in_reverse(length, [&](int64_t t0, int64_t steps) {
    gather_chunk(g.grad_h_re, length, group, t0, steps, G_re, ahead);
    gather_chunk(g.grad_h_im, length, group, t0, steps, G_im, ahead);
    states_re.gather(g.h_re, length, group, t0, steps, ahead);
    states_im.gather(g.h_im, length, group, t0, steps, ahead);
    previous_states(states_re.states(), h0_re, t0, steps, lanes, prev_re);
    previous_states(states_im.states(), h0_im, t0, steps, lanes, prev_im);
    step_backward(lr.data(), li.data(), prev_re, prev_im, G_re, G_im, carry_re.data(),
                  carry_im.data(), sum_re.data(), sum_im.data(), steps, lanes);
    scatter_chunk(G_re, length, group, t0, steps, g.grad_b_re, ahead);
    scatter_chunk(G_im, length, group, t0, steps, g.grad_b_im, ahead);
  });
  store_group_values(sum_re, group, g.grad_lambda_re);
  store_group_values(sum_im, group, g.grad_lambda_im);
  store_group_values(carry_re, group, g.grad_h0_re);
  store_group_values(carry_im, group, g.grad_h0_im);
}

template <typename T>
void forward_rows(const ComplexScanForward<T>& f, ComplexScanShape shape, int64_t begin,
                  int64_t end) {
  for_channel_groups(shape.channels, begin, end,
                     [&](const ChannelGroup& group) { forward_group(f, shape, group); });
}

template <typename T>
void backward_rows(const ComplexScanBackward<T>& g, ComplexScanShape shape, int64_t begin,
                   int64_t end) {
  for_channel_groups(shape.channels, begin, end,
                     [&](const ChannelGroup& group) { backward_group(g, shape, group); });
}

}  // namespace

void complex_scan_forward_cpu(const ComplexScanForward<float>& f, ComplexScanShape shape,
                              int64_t begin, int64_t end) {
  forward_rows(f, shape, begin, end);
}
void complex_scan_forward_cpu(const ComplexScanForward<double>& f, ComplexScanShape shape,
                              int64_t begin, int64_t end) {
  forward_rows(f, shape, begin, end);
}
void complex_scan_backward_cpu(const ComplexScanBackward<float>& g, ComplexScanShape shape,
                               int64_t begin, int64_t end) {
  backward_rows(g, shape, begin, end);
}
void complex_scan_backward_cpu(const ComplexScanBackward<double>& g, ComplexScanShape shape,
                               int64_t begin, int64_t end) {
  backward_rows(g, shape, begin, end);
}

}  // namespace memscript::kernels
