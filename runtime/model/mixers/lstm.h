#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// Classic LSTM over d_model, followed by an output projection back into the residual stream.
// Parameters are torch::nn::LSTM's (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0).
// Options: hidden (default d_model); impl: "fused" (default) runs the recurrence through
// ops::lstm_recurrence (kernels/lstm/), "reference" runs libtorch's LSTM on its own CPU kernels
// (not oneDNN: see lstm.cpp);
// init: "uniform" (default, libtorch's U(−1/√hidden, 1/√hidden) for every weight and bias) or
// "normal" (weights N(0, 0.02), biases zero: the study's LSTM).
// State: {h, c}, each [1, batch, hidden].
class LstmMixerImpl : public MixerImpl {
 public:
  LstmMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  MixerOutput fused_forward(const torch::Tensor& x, const MixerState& state);
  MixerOutput reference_forward(const torch::Tensor& x, const MixerState& state);

  int64_t hidden_;
  std::string init_;
  Impl impl_;
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear output_{nullptr};
};

Mixer make_lstm_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
