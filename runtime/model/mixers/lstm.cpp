#include "runtime/model/mixers/lstm.h"
#include "runtime/ops/linear/linear.h"
#include "runtime/ops/lstm/lstm.h"

namespace memscript {

namespace {

// libtorch runs a CPU LSTM on oneDNN when it may, and oneDNN's backward splits its sums by the
// number of threads: the gradients (and so every later step) then differ in the last bits
// between --threads 1 and --threads 2, on some CPUs at least (AMD Zen 3 with AVX2). Runs must
// re-run to the same numbers, so the reference LSTM takes libtorch's own kernels, which give the
// same bits for any thread count, at the cost of speed. The switch is global in libtorch, so it
// is set for the call and put back after; the backward's nodes are chosen here, in the forward.
class WithoutOneDnn {
 public:
  WithoutOneDnn() : was_enabled_(at::globalContext().userEnabledMkldnn()) {
    at::globalContext().setUserEnabledMkldnn(false);
  }
  ~WithoutOneDnn() { at::globalContext().setUserEnabledMkldnn(was_enabled_); }
  WithoutOneDnn(const WithoutOneDnn&) = delete;
  WithoutOneDnn& operator=(const WithoutOneDnn&) = delete;

 private:
  bool was_enabled_;
};

}  // namespace

LstmMixerImpl::LstmMixerImpl(const MixerContext& context, Options& options)
    : hidden_(options.integer("hidden", context.d_model, {.min = 1})),
      init_(options.string("init", "uniform", {"uniform", "normal"})),
      impl_(read_impl(options)) {
  lstm_ = register_module(
      "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(context.d_model, hidden_).batch_first(true)));
  if (init_ == "normal") {
    torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> weights = lstm_->all_weights();
    weights[0].normal_(0.0, 0.02);
    weights[1].normal_(0.0, 0.02);
    weights[2].zero_();
    weights[3].zero_();
  }
  output_ = register_module("output", torch::nn::Linear(hidden_, context.d_model));
  init_output_projection(output_, context.layers);
}

MixerOutput LstmMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  return impl_.fused ? fused_forward(x, state) : reference_forward(x, state);
}

// The input projection of every token in one product (both biases in it), then the
// recurrence through kernels/lstm/lstm.h. The state keeps libtorch's [1, batch, hidden] layout, so
// chunks may switch between the implementations.
MixerOutput LstmMixerImpl::fused_forward(const torch::Tensor& x, const MixerState& state) {
  // all_weights(): weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0.
  const std::vector<torch::Tensor> weights = lstm_->all_weights();
  const torch::Tensor pre = ops::linear(x, weights[0], weights[2] + weights[3]);
  torch::Tensor h0, c0;
  if (!state.empty()) {
    h0 = state.tensors.at(0).squeeze(0);
    c0 = state.tensors.at(1).squeeze(0);
  }
  const ops::LstmResult r = ops::lstm_recurrence(pre, weights[1], h0, c0);
  return {ops::linear(output_, r.outputs),
          {{r.h_last.unsqueeze(0), r.c_last.unsqueeze(0)}, state.position + x.size(1)}};
}

MixerOutput LstmMixerImpl::reference_forward(const torch::Tensor& x, const MixerState& state) {
  std::optional<std::tuple<torch::Tensor, torch::Tensor>> initial;
  if (!state.empty()) initial = std::make_tuple(state.tensors.at(0), state.tensors.at(1));
  auto [outputs, final_state] = [&] {
    const WithoutOneDnn deterministic;
    return lstm_->forward(x, initial);
  }();
  auto [h, c] = final_state;
  return {ops::linear(output_, outputs), {{h, c}, state.position + x.size(1)}};
}

nlohmann::json LstmMixerImpl::config() const {
  nlohmann::json config = {{"mixer", "lstm"}, {"hidden", hidden_}, {"impl", impl_.name()}};
  if (init_ != "uniform") config["init"] = init_;  // the default stays unwritten, as before
  return config;
}

Mixer make_lstm_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<LstmMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry lstm_entry() {
  return {.name = "lstm",
          .make = make_lstm_mixer,
          .recurrent = true,
          .negative_eigenvalues = false,
          .short_conv = false,
          .seed_mini = {{"hidden", option(16)}, {"init", option("normal")}}};
}

}  // namespace memscript
