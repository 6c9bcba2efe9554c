#include "runtime/model/short_conv.h"

#include "runtime/ops/causal_conv/causal_conv.h"

namespace memscript {

ShortConvMixerImpl::ShortConvMixerImpl(Mixer mixer, const MixerContext& context, int64_t kernel,
                                       Impl impl)
    : kernel_(kernel), impl_(impl) {
  conv_ = register_module(
      "conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(context.d_model, context.d_model, kernel)
                                    .groups(context.d_model)));
  mixer_ = register_module("mixer", std::move(mixer));
}

MixerOutput ShortConvMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  torch::Tensor window;
  MixerState inner;
  if (!state.empty()) {
    window = state.tensors.at(0);
    inner.tensors.assign(state.tensors.begin() + 1, state.tensors.end());
    inner.position = state.position;
  }
  const ops::CausalConvResult convolved =
      impl_.fused ? ops::causal_conv_silu(x, window, conv_->weight, conv_->bias)
                  : ops::causal_conv_silu_reference(x, window, conv_->weight, conv_->bias);
  MixerOutput out = mixer_->forward(convolved.u, inner);
  out.state.tensors.insert(out.state.tensors.begin(), convolved.window_after);
  return out;
}

nlohmann::json ShortConvMixerImpl::config() const {
  nlohmann::json config = mixer_->config();
  config["short_conv"] = kernel_;
  return config;
}

Mixer with_short_conv(Mixer mixer, const MixerEntry& entry, const MixerContext& context,
                      Options& options) {
  if (!options.has("short_conv")) return mixer;
  if (!entry.short_conv) {
    const auto takes = [](const MixerEntry& e) { return e.short_conv; };
    options.fail("short_conv",
                 "applies to " + join(mixer_names_where(takes), ", ") + ", not " + entry.name);
  }
  const int64_t kernel = options.integer("short_conv", 0, {.min = 2, .max = 64});
  const Impl impl = read_impl(options);
  return std::make_shared<ShortConvMixerImpl>(std::move(mixer), context, kernel, impl);
}

}  // namespace memscript
