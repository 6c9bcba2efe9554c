#include "runtime/model/mixers/lstm.h"

namespace memscript {

LstmMixerImpl::LstmMixerImpl(const MixerContext& context, Options& options)
    : hidden_(options.integer("hidden", context.d_model, {.min = 1})) {
  lstm_ = register_module(
      "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(context.d_model, hidden_).batch_first(true)));
  output_ = register_module("output", torch::nn::Linear(hidden_, context.d_model));
  init_output_projection(output_, context.layers);
}

torch::Tensor LstmMixerImpl::forward(const torch::Tensor& x) {
  auto [outputs, state] = lstm_->forward(x);
  return output_->forward(outputs);
}

nlohmann::json LstmMixerImpl::config() const { return {{"mixer", "lstm"}, {"hidden", hidden_}}; }

Mixer make_lstm_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<LstmMixerImpl>(context, options);
}

}  // namespace memscript
