#include "runtime/model/mixers/qlstm.h"

#include "runtime/ops/gated_block/gated_block.h"
#include "runtime/ops/gated_scan/gated_scan.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

QlstmMixerImpl::QlstmMixerImpl(const MixerContext& context, Options& options)
    : hidden_(options.integer("hidden", context.d_model, {.min = 1})),
      negative_eigenvalues_(options.boolean("negative_eigenvalues", false)),
      gate_bias_(options.boolean("gate_bias", false)),
      impl_(read_impl(options)) {
  gates_ = register_module(
      "gates",
      torch::nn::Linear(torch::nn::LinearOptions(context.d_model, 4 * hidden_).bias(gate_bias_)));
  forget_bias_ = register_parameter("forget_bias", torch::zeros({hidden_}));
  output_ = register_module("output", torch::nn::Linear(hidden_, context.d_model));
  torch::NoGradGuard no_grad;
  gates_->weight.normal_(0.0, 0.02);
  if (gate_bias_) gates_->bias.zero_();
  init_output_projection(output_, context.layers);
}

MixerOutput QlstmMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const torch::Tensor pre = ops::linear(gates_, x);
  const torch::Tensor c0 = state.empty() ? torch::Tensor() : state.tensors.at(0);
  const ops::GatedScanResult cell =
      impl_.fused ? ops::qlstm_cell(pre, forget_bias_, c0, negative_eigenvalues_)
                  : ops::qlstm_cell_reference(pre, forget_bias_, c0, negative_eigenvalues_);
  return {ops::linear(output_, cell.outputs), {{cell.last}, state.position + x.size(1)}};
}

MixerOutput QlstmMixerImpl::forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                                           const MixerState& state) {
  if (!impl_.fused) return MixerImpl::forward_normed(x, norm, state);
  const ops::GatedProjections projections{gates_->weight, gates_->bias, forget_bias_,
                                          output_->weight, output_->bias};
  const ops::GatedBlockResult block =
      ops::qlstm_block(x, norm, projections, state.empty() ? torch::Tensor() : state.tensors.at(0),
                       negative_eigenvalues_);
  return {block.y, {{block.last}, state.position + x.size(1)}};
}

nlohmann::json QlstmMixerImpl::config() const {
  nlohmann::json config = {{"mixer", "qlstm"},
                           {"hidden", hidden_},
                           {"negative_eigenvalues", negative_eigenvalues_},
                           {"impl", impl_.name()}};
  if (gate_bias_) config["gate_bias"] = true;  // the default stays unwritten, as before
  return config;
}

Mixer make_qlstm_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<QlstmMixerImpl>(context, options);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry qlstm_entry() {
  return {.name = "qlstm",
          .make = make_qlstm_mixer,
          .recurrent = true,
          .negative_eigenvalues = true,
          .short_conv = false,
          .seed_mini = {{"hidden", option(16)}, {"gate_bias", option(true)}}};
}

}  // namespace memscript
