#pragma once

#include "runtime/model/fused/impl.h"
#include "runtime/model/mixer.h"

namespace memscript {

// Classic LSTM (libtorch's fused implementation) over d_model, followed by an output
// projection back into the residual stream. Options: hidden (default d_model); impl ("fused" or
// "reference", both libtorch's LSTM: it is already a fused op).
// State: {h, c}, each [1, batch, hidden].
class LstmMixerImpl : public MixerImpl {
 public:
  LstmMixerImpl(const MixerContext& context, Options& options);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  int64_t hidden_;
  Impl impl_;
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear output_{nullptr};
};

Mixer make_lstm_mixer(const MixerContext& context, Options& options);

}  // namespace memscript
