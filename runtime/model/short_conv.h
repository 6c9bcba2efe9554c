#pragma once

#include "runtime/model/mixer.h"
#include "runtime/ops/common/impl.h"

namespace memscript {

// A short causal convolution before a mixer (`short_conv = K` on gpt, linear_attention,
// deltanet, gated_deltanet), the recipe of Zoology's newer configurations, Based and
// flash-linear-attention:
//
//   u = silu(causal depthwise conv_K(x) + b)     per channel, the last K inputs
//   y = mixer(u)
//
// flash-linear-attention convolves q, k and v after their projections (three convolutions);
// this one convolves the mixer's input, once, before the projections: the same receptive field
// of K tokens for every projection, a third of the parameters. The convolution runs in Mamba's
// kernel (kernels/causal_conv/causal_conv.h) and follows the mixer's `impl`.
//
// State: {window [B, d_model, K − 1], the mixer's state...}.
class ShortConvMixerImpl : public MixerImpl {
 public:
  ShortConvMixerImpl(Mixer mixer, const MixerContext& context, int64_t kernel, Impl impl);
  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override;
  nlohmann::json config() const override;

 private:
  Mixer mixer_;
  int64_t kernel_;
  Impl impl_;
  torch::nn::Conv1d conv_{nullptr};
};

// `mixer` (built from `entry`) with the convolution `options` ask for (short_conv = K, K >= 2)
// in front, or `mixer` itself when they do not.
Mixer with_short_conv(Mixer mixer, const MixerEntry& entry, const MixerContext& context,
                      Options& options);

}  // namespace memscript
