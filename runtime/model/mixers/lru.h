#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting Recurrent Neural Networks"): a
// complex diagonal linear recurrence, parametrized so that |λ| < 1 always holds and the input
// is normalized by γ so that the state's scale does not depend on how close |λ| is to 1.
//   λ = a · e^{iφ},  a = exp(−exp(ν)),  φ = exp(θ)
//   x_t = λ ⊙ x_{t-1} + γ ⊙ (B u_t),   γ = sqrt(1 − |λ|²)
//   y_t = Re(C x_t) + D ⊙ u_t,   out_t = W_out y_t + b_out
// B and C are complex (a real and an imaginary weight each); D is real. The complex state is
// carried as two real tensors so that the mixer runs on every device and real dtype.
//
// Options:
//   d_state (default d_model): complex channels.
//   r_min, r_max (default 0, 1; 0 <= r_min < r_max <= 1): the init ring; |λ|² is drawn
//     uniformly between r_min² and r_max², i.e. λ is uniform on the ring's area.
//   max_phase (default 2π; >= 0): φ drawn uniformly in [0, max_phase]. max_phase = 0 asks for a
//     real recurrence: there is then no θ at all (φ = 0), rather than a θ = log 0 = −∞ that
//     training and weight decay would turn into NaN.
//   negative_eigenvalues (default false): the real factor becomes a = 2·exp(−exp(ν)) − 1, in
//     (−1, 1) instead of (0, 1), mirroring qlstm's forget gate. With max_phase = 0 this is the
//     real LRU with λ in (−1, 1), whose state can flip sign each step; with a phase, λ can
//     already point anywhere in the unit disk, and the option only lets the modulus pass through
//     0 without turning. a still starts on the ring (a > 0; |λ| = |a|), γ = sqrt(1 − a²).
//     Unlike qlstm's forget gate, λ does not depend on the input: a negative λ alternates the
//     sign with the distance between tokens, not with how many ones were seen, so this option
//     alone does not give the LRU parity (measured: the real LRU stays above loss 0.6 on
//     parity of length 8 after 400 steps with or without it). It is here so that the
//     comparison across mixers is one option away.
//     In floating point a can round to −1 at large ν (float32: ν ≳ 2.9); γ is then ~0.
//   impl (default "fused"): "fused" runs ops::complex_scan (kernels/complex_scan/), "reference"
//     ops::complex_scan_reference, a step loop of libtorch ops.
// State: {re, im}, each [batch, d_state].
class LruMixerImpl : public MixerImpl {
 public:
  LruMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

  // λ's real and imaginary parts, [d_state] each.
  std::pair<torch::Tensor, torch::Tensor> eigenvalues() const;

 private:
  torch::Tensor real_factor() const;  // a, [d_state]
  torch::Tensor input_scale() const;  // γ = sqrt(1 − a²), [d_state]

  int64_t d_state_;
  double r_min_, r_max_, max_phase_;
  bool negative_eigenvalues_;
  Impl impl_;
  torch::Tensor nu_;     // ν, [d_state]
  torch::Tensor theta_;  // θ, [d_state]; undefined when max_phase = 0
  torch::nn::Linear b_re_{nullptr}, b_im_{nullptr}, c_re_{nullptr}, c_im_{nullptr};
  torch::Tensor d_;  // D, [d_model]
  torch::nn::Linear output_{nullptr};
};

Mixer make_lru_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
