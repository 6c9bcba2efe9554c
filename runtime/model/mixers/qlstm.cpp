#include "runtime/model/mixers/qlstm.h"

#include "runtime/ops/common/launch.h"
#include "runtime/ops/gated_block/gated_block.h"
#include "runtime/ops/gated_scan/gated_scan.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

namespace {

// c_t = f_t ⊙ c_{t-1} + u_t over the length axis of [batch, length, hidden] tensors, starting
// from c0 [batch, hidden]. A step loop of tensor ops: slow but exact on every device and dtype.
torch::Tensor diagonal_scan(const torch::Tensor& f, const torch::Tensor& u, torch::Tensor c) {
  std::vector<torch::Tensor> cells;
  cells.reserve(static_cast<size_t>(f.size(1)));
  for (int64_t t = 0; t < f.size(1); ++t) {
    c = f.select(1, t) * c + u.select(1, t);
    cells.push_back(c);
  }
  return torch::stack(cells, 1);
}

}  // namespace

torch::Tensor qlstm_forget_gate(const torch::Tensor& preactivation, bool negative_eigenvalues) {
  const torch::Tensor gate = torch::sigmoid(preactivation);
  return negative_eigenvalues ? 2 * gate - 1 : gate;
}

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
  const int64_t position = state.position + x.size(1);
  if (impl_.fused && ops::kernels_take(pre)) {
    const ops::GatedScanResult cell =
        ops::qlstm_cell(pre, forget_bias_, state.empty() ? torch::Tensor() : state.tensors.at(0),
                        negative_eigenvalues_);
    return {ops::linear(output_, cell.outputs), {{cell.last}, position}};
  }
  const std::vector<torch::Tensor> gates = pre.chunk(4, -1);
  const torch::Tensor f = qlstm_forget_gate(gates[0] + forget_bias_ + 1, negative_eigenvalues_);
  const torch::Tensor input = torch::sigmoid(gates[1]) * torch::tanh(gates[2]);
  const torch::Tensor c0 =
      state.empty() ? torch::zeros({x.size(0), hidden_}, x.options()) : state.tensors.at(0);
  const torch::Tensor c = diagonal_scan(f, input, c0);
  const torch::Tensor h = torch::sigmoid(gates[3]) * torch::tanh(c);
  return {ops::linear(output_, h), {{c.select(1, -1)}, position}};
}

MixerOutput QlstmMixerImpl::forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                                           const MixerState& state) {
  if (impl_.fused && ops::kernels_take(x)) {
    const ops::GatedProjections projections{gates_->weight, gates_->bias, forget_bias_,
                                            output_->weight, output_->bias};
    const std::optional<ops::GatedBlockResult> block = ops::qlstm_block(
        x, norm, projections, state.empty() ? torch::Tensor() : state.tensors.at(0),
        negative_eigenvalues_);
    if (block) return {block->y, {{block->last}, state.position + x.size(1)}};
  }
  return MixerImpl::forward_normed(x, norm, state);
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

}  // namespace memscript
