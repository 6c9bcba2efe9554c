#include "runtime/model/mixers/gpt.h"

#include <cmath>

#include "runtime/model/heads.h"
#include "runtime/ops/causal_attention/causal_attention.h"
#include "runtime/ops/linear/linear.h"

namespace memscript {

namespace {

const std::vector<std::string> kPositionKinds = {"none", "learned", "sinusoidal",
                                                 "rope", "alibi",   "relative"};

// Angles are formed in float64 so that float32 models at long positions still get accurate
// sines; only the finished table is cast down.
torch::Tensor position_angles(int64_t position, int64_t length, int64_t pairs, int64_t width,
                              double base, const torch::Device& device) {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(device);
  const torch::Tensor p = torch::arange(position, position + length, f64).unsqueeze(1);
  const torch::Tensor i = torch::arange(pairs, f64).unsqueeze(0);
  return p * torch::exp(-std::log(base) * 2.0 * i / static_cast<double>(width));
}

}  // namespace

GptMixerImpl::GptMixerImpl(const MixerContext& context, Options& options)
    : where_(options.context()),
      d_model_(context.d_model),
      heads_(context.heads),
      head_dim_(options.integer("head_dim", context.d_model / context.heads, {.min = 1})),
      positions_(options.string("positions", "learned", kPositionKinds)),
      max_length_(options.integer("max_length", 1024, {.min = 1, .max = 1 << 24})),
      rope_base_(options.number("rope_base", 10000.0, 1.0)),
      impl_(read_impl(options)) {
  if (positions_ == "rope" && head_dim_ % 2 != 0) {
    options.fail("head_dim", "= " + std::to_string(head_dim_) +
                                 " must be even for positions = \"rope\" (it rotates pairs)");
  }
  const int64_t inner = heads_ * head_dim_;
  qkv_ = register_module("qkv", torch::nn::Linear(d_model_, 3 * inner));
  output_ = register_module("output", torch::nn::Linear(inner, d_model_));
  torch::NoGradGuard no_grad;
  qkv_->weight.normal_(0.0, 0.02);
  qkv_->bias.zero_();
  init_output_projection(output_, context.layers);
  if (positions_ == "learned") {
    table_ = register_parameter("positions", torch::empty({max_length_, d_model_}));
    // The table is added to a LayerNorm output (unit RMS per coordinate), not to an
    // embedding: at 0.02 it would start ~50x below the content and barely steer attention.
    // 1/sqrt(2) is the sinusoidal table's RMS, so both kinds start at the same strength.
    table_.normal_(0.0, std::sqrt(0.5));
  }
  if (positions_ == "alibi") slopes_ = ops::alibi_slopes(heads_);
  if (positions_ == "relative") {
    // Transformer-XL's initialisation, as Delétang et al.'s: the biases at normal(0, 0.02).
    content_bias_ = register_parameter("content_bias", torch::empty({heads_, head_dim_}));
    position_bias_ = register_parameter("position_bias", torch::empty({heads_, head_dim_}));
    content_bias_.normal_(0.0, 0.02);
    position_bias_.normal_(0.0, 0.02);
    relative_ = register_module(
        "relative", torch::nn::Linear(torch::nn::LinearOptions(d_model_, inner).bias(false)));
    relative_->weight.normal_(0.0, 0.02);  // as q, k and v's projection
  }
}

void GptMixerImpl::check_length(int64_t position, int64_t length) const {
  const int64_t end = position + length;
  if (end <= max_length_) return;
  throw UserError(where_ + ": option 'max_length' = " + std::to_string(max_length_) +
                  " is too short: the gpt mixer was asked for a chunk of " +
                  std::to_string(length) + " tokens after " + std::to_string(position) +
                  ", which needs learned positions up to " + std::to_string(end) +
                  "; raise max_length to at least " + std::to_string(end) +
                  ", or use positions = \"sinusoidal\", \"rope\", \"alibi\" or \"relative\", "
                  "which have no limit");
}

torch::Tensor GptMixerImpl::add_positions(const torch::Tensor& x, int64_t position) const {
  const int64_t length = x.size(1);
  if (positions_ == "learned") return x + table_.narrow(0, position, length);
  if (positions_ == "sinusoidal")
    return x + sinusoidal_positions(position, length, d_model_, x.options());
  return x;
}

MixerOutput GptMixerImpl::forward(const torch::Tensor& x, const MixerState& state) {
  const int64_t length = x.size(1);
  if (positions_ == "learned") check_length(state.position, length);
  const std::vector<torch::Tensor> qkv =
      ops::linear(qkv_, add_positions(x, state.position)).chunk(3, -1);
  torch::Tensor q = split_heads(qkv[0], heads_);
  torch::Tensor k = split_heads(qkv[1], heads_);
  torch::Tensor v = split_heads(qkv[2], heads_);
  if (positions_ == "rope") {
    q = apply_rope(q, state.position, rope_base_);
    k = apply_rope(k, state.position, rope_base_);
  }
  if (!state.empty()) {
    k = torch::cat({state.tensors.at(0), k}, 2);
    v = torch::cat({state.tensors.at(1), v}, 2);
  }
  const torch::Tensor merged =
      merge_heads(positions_ == "relative" ? attend_relative(q, k, v) : attend(q, k, v));
  return {ops::linear(output_, merged), {{k, v}, state.position + length}};
}

torch::Tensor GptMixerImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v) const {
  // The ops take the slopes in any dtype and on any device: they convert them where they use them.
  return impl_.fused ? ops::causal_attention(q, k, v, slopes_)
                     : ops::causal_attention_reference(q, k, v, slopes_);
}

// Transformer-XL's scores: (q + u) · k_j + (q + w) · W_r R_{p_i − j}, R the sinusoidal table of
// distances.
torch::Tensor GptMixerImpl::attend_relative(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v) const {
  const int64_t keys = k.size(2);
  const torch::Tensor u = content_bias_.view({1, heads_, 1, head_dim_});
  const torch::Tensor w = position_bias_.view({1, heads_, 1, head_dim_});
  // W_r R_d for d = 0 .. keys − 1, as [heads, distance, head_dim].
  const torch::Tensor table = sinusoidal_positions(0, keys, d_model_, q.options());
  const torch::Tensor relative_keys =
      torch::matmul(table, relative_->weight.t()).view({keys, heads_, head_dim_}).transpose(0, 1);
  return impl_.fused ? ops::causal_attention_relative(q + u, k, v, q + w, relative_keys)
                     : ops::causal_attention_relative_reference(q + u, k, v, q + w, relative_keys);
}

nlohmann::json GptMixerImpl::config() const {
  return {{"mixer", "gpt"},          {"heads", heads_},           {"head_dim", head_dim_},
          {"positions", positions_}, {"max_length", max_length_}, {"rope_base", rope_base_},
          {"impl", impl_.name()}};
}

Mixer make_gpt_mixer(const MixerContext& context, Options& options) {
  return std::make_shared<GptMixerImpl>(context, options);
}

torch::Tensor sinusoidal_positions(int64_t position, int64_t length, int64_t width,
                                   const torch::TensorOptions& options) {
  const int64_t pairs = (width + 1) / 2;
  const torch::Tensor angles =
      position_angles(position, length, pairs, width, 10000.0, options.device());
  const torch::Tensor table =
      torch::stack({torch::sin(angles), torch::cos(angles)}, -1).reshape({length, 2 * pairs});
  return table.narrow(1, 0, width).to(options.dtype());
}

torch::Tensor apply_rope(const torch::Tensor& x, int64_t position, double base) {
  const int64_t length = x.size(2);
  const int64_t dim = x.size(3);
  const int64_t half = dim / 2;
  const torch::Tensor angles =
      position_angles(position, length, half, dim, base, x.device()).repeat({1, 2}).to(x.dtype());
  const torch::Tensor rotated = torch::cat({-x.narrow(3, half, half), x.narrow(3, 0, half)}, 3);
  return x * torch::cos(angles) + rotated * torch::sin(angles);
}

// This mixer's registry entry: the build lists every mixers/<name>.cpp and mixer_entries()
// calls its <name>_entry().
MixerEntry gpt_entry() {
  return {.name = "gpt",
          .make = make_gpt_mixer,
          .recurrent = false,
          .negative_eigenvalues = false,
          .short_conv = true,
          .seed_mini = {{"head_dim", option(4)}},
          .seed_mini_alone_decoder = {{"residual_positions", option("learned")}},
          .seed_mini_alone = {{"positions", option("none")}}};
}

}  // namespace memscript
