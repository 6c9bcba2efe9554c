#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// Quasi-LSTM: an LSTM whose gates read only the current input, so the cell is a diagonal linear
// recurrence (the part a parallel scan can take over) and the one nonlinearity sits outside it.
//   f_t = σ(W_f x_t + b_f + 1)    the +1 starts the cell remembering (f ≈ 0.73)
//   i_t = σ(W_i x_t),  z_t = tanh(W_z x_t),  o_t = σ(W_o x_t)
//   c_t = f_t ⊙ c_{t-1} + i_t ⊙ z_t,   h_t = o_t ⊙ tanh(c_t),   y_t = W_out h_t + b_out
// Options: hidden (default d_model); impl ("fused": kernels/gated_scan/gated_scan.h, and at widths
// up to 16 on the CPU the block's layer norm and both projections fused in too,
// kernels/gated_block/gated_block.h; or "reference": a step loop of libtorch ops);
// negative_eigenvalues (default false): the forget gate becomes f_t = 2σ(W_f x_t + b_f + 1) − 1, in
// (−1, 1), the same pre-activation stretched so that the cell can flip its sign each step (what
// parity needs, Grazzi et al. 2024). 2σ(a) − 1 = tanh(a/2), so the gate stays smooth and starts at
// 0.46 rather than 0.73. gate_bias (default false): a zero-initialised bias on all four gates'
// pre-activations (the study's qLSTM has one; b_f stays, so the forget gate's bias is their sum).
// State: {c}, [batch, hidden].
class QlstmMixerImpl : public MixerImpl {
 public:
  QlstmMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  MixerOutput forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                             const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  int64_t hidden_;
  bool negative_eigenvalues_;
  bool gate_bias_;
  Impl impl_;
  torch::nn::Linear gates_{nullptr};  // [f, i, z, o] pre-activations, bias when gate_bias_
  torch::Tensor forget_bias_;         // b_f
  torch::nn::Linear output_{nullptr};
};

Mixer make_qlstm_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
