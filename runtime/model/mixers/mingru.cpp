#include "runtime/model/mixers/mingru.h"

#include "runtime/ops/gated_block/gated_block.h"
#include "runtime/ops/gated_scan/gated_scan.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

MinGruMixerImpl::MinGruMixerImpl(const MixerContext& context, Options& options)
    : hidden_(options.integer("hidden", context.d_model, {.min = 1})),
      negative_eigenvalues_(options.boolean("negative_eigenvalues", false)),
      impl_(read_impl(options)) {
  input_ = register_module("input", torch::nn::Linear(context.d_model, 2 * hidden_));
  output_ = register_module("output", torch::nn::Linear(hidden_, context.d_model));
  torch::NoGradGuard no_grad;
  input_->weight.normal_(0.0, 0.02);
  input_->bias.zero_();
  init_output_projection(output_, context.layers);
}

MixerOutput MinGruMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const torch::Tensor pre = ops::linear(input_, x);
  const torch::Tensor h0 = state.empty() ? torch::Tensor() : state.tensors.at(0);
  const ops::GatedScanResult cell =
      impl_.fused ? ops::mingru_cell(pre, h0, negative_eigenvalues_)
                  : ops::mingru_cell_reference(pre, h0, negative_eigenvalues_);
  return {ops::linear(output_, cell.outputs), {{cell.last}, state.position + x.size(1)}};
}

MixerOutput MinGruMixerImpl::forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                                            const MixerState& state) {
  if (!impl_.fused) return MixerImpl::forward_normed(x, norm, state);
  const ops::GatedProjections projections{input_->weight, input_->bias, torch::Tensor(),
                                          output_->weight, output_->bias};
  const ops::GatedBlockResult block =
      ops::mingru_block(x, norm, projections, state.empty() ? torch::Tensor() : state.tensors.at(0),
                        negative_eigenvalues_);
  return {block.y, {{block.last}, state.position + x.size(1)}};
}

nlohmann::json MinGruMixerImpl::config() const {
  return {{"mixer", "mingru"},
          {"hidden", hidden_},
          {"negative_eigenvalues", negative_eigenvalues_},
          {"impl", impl_.name()}};
}

Mixer make_mingru_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<MinGruMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry mingru_entry() {
  return {.name = "mingru",
          .make = make_mingru_mixer,
          .recurrent = true,
          .negative_eigenvalues = true,
          .short_conv = false};
}

}  // namespace memscript
