#include "runtime/model/mixers/lstm.h"
#include "runtime/model/fused/linear.h"

namespace memscript {

LstmMixerImpl::LstmMixerImpl(const MixerContext& context, Options& options)
    : hidden_(options.integer("hidden", context.d_model, {.min = 1})), impl_(read_impl(options)) {
  lstm_ = register_module(
      "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(context.d_model, hidden_).batch_first(true)));
  output_ = register_module("output", torch::nn::Linear(hidden_, context.d_model));
  init_output_projection(output_, context.layers);
}

MixerOutput LstmMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  std::optional<std::tuple<torch::Tensor, torch::Tensor>> initial;
  if (!state.empty()) initial = std::make_tuple(state.tensors.at(0), state.tensors.at(1));
  auto [outputs, final_state] = lstm_->forward(x, initial);
  auto [h, c] = final_state;
  return {fused::linear(output_, outputs), {{h, c}, state.position + x.size(1)}};
}

nlohmann::json LstmMixerImpl::config() const {
  return {{"mixer", "lstm"}, {"hidden", hidden_}, {"impl", impl_.name()}};
}

Mixer make_lstm_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<LstmMixerImpl>(context, options);
}

}  // namespace memscript
