#include "runtime/model/decoder.h"

#include <cmath>
#include <map>
#include <optional>

#include "runtime/memory.h"
#include "runtime/model/show_sizes.h"
#include "runtime/ops/cross_entropy/cross_entropy.h"
#include "runtime/ops/embedding/embedding.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"
#include "runtime/ops/mlp_block/mlp_block.h"

namespace memscript {

namespace {

void init_normal(torch::Tensor& weight) {
  torch::NoGradGuard no_grad;
  weight.normal_(0.0, 0.02);
}

void init_linear(torch::nn::Linear& linear) {
  init_normal(linear->weight);
  torch::NoGradGuard no_grad;
  if (linear->bias.defined()) linear->bias.zero_();
}

// `mixer = "lstm"` or `mixer = {"lstm", "gpt"}` (one per layer, cycled when shorter).
std::vector<std::string> read_mixer_names(Options& options) {
  const OptionValue* value = options.raw("mixer");
  if (!value) options.fail("mixer", "is required; mixers: " + join(mixer_names(), ", "));
  if (const auto* name = std::get_if<std::string>(&value->value)) return {*name};
  if (const auto* list = std::get_if<std::shared_ptr<OptionList>>(&value->value)) {
    std::vector<std::string> names;
    for (const OptionValue& item : **list) {
      const auto* name = std::get_if<std::string>(&item.value);
      if (!name) options.fail("mixer", "must list mixer names, got " + value->show());
      names.push_back(*name);
    }
    if (!names.empty()) return names;
  }
  options.fail("mixer", "must be a mixer name or a list of them, got " + value->show());
}

// What each layer is: a mixer name, and the options its mixer reads.
struct LayerPlan {
  std::string mixer;
  std::shared_ptr<Options> options;  // null: the mixer reads the decoder's own options
};

// `layers = n` with `mixer = ...`, or `layers = { { mixer = "mamba", d_state = 8 }, ... }`.
// Far beyond any model that trains; the bound keeps a typo like 1e9 from allocating a plan
// before the memory check can name it.
constexpr int64_t kMaxLayers = 100000;

std::vector<LayerPlan> plan_layers(Options& options) {
  const OptionValue* layers = options.raw("layers");
  const auto* list = layers ? std::get_if<std::shared_ptr<OptionList>>(&layers->value) : nullptr;
  if (!list) {
    const int64_t count = options.integer("layers", 2, {.min = 1, .max = kMaxLayers});
    const std::vector<std::string> names = read_mixer_names(options);
    std::vector<LayerPlan> plan;
    for (int64_t i = 0; i < count; ++i)
      plan.push_back({names[static_cast<size_t>(i) % names.size()], nullptr});
    return plan;
  }
  if ((*list)->empty()) options.fail("layers", "must not be empty");
  if (options.has("mixer"))
    options.fail("mixer", "goes inside each entry of 'layers' when 'layers' is a list");
  std::vector<LayerPlan> plan;
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const auto* table = std::get_if<std::shared_ptr<Options>>(&(**list)[i].value);
    if (!table)
      options.fail("layers", "must be a number or a list of tables like { mixer = \"gpt\" }");
    auto layer = std::make_shared<Options>(**table);
    const std::optional<std::string> mixer = layer->optional_string("mixer");
    if (!mixer)
      options.fail("layers", "entry " + std::to_string(i + 1) + " has no mixer = \"...\"");
    plan.push_back({*mixer, layer});
  }
  return plan;
}

// Presets fill in defaults that explicit options override.
//   seed-mini: what the study this project follows ran (docs/study.md), per mixer. Shared: 2
//              layers, d_model 4, 4 heads, an MLP of 8, the embedding scaled by √d_model, a head
//              without bias; each mixer's own in its registry entry (mixer.cpp: seed_mini, and
//              seed_mini_alone* when every layer is that mixer). A model of several mixers takes
//              the shared decoder sizes, and each layer its mixer's options.
//   small:     d_model 64, 4 heads, 2 layers
struct Preset {
  OptionDefaults decoder;                          // the decoder's own options
  std::map<std::string, OptionDefaults> by_mixer;  // options the layers of one mixer read

  OptionDefaults mixer(const std::string& name) const {
    const auto found = by_mixer.find(name);
    return found == by_mixer.end() ? OptionDefaults{} : found->second;
  }
};

Preset seed_mini(const std::vector<LayerPlan>& plan) {
  Preset preset{{{"d_model", option(4)},
                 {"heads", option(4)},
                 {"mlp_ratio", option(2)},
                 {"scale_embedding", option(true)},
                 {"head_bias", option(false)}},
                {}};
  for (const MixerEntry& entry : mixer_entries()) preset.by_mixer[entry.name] = entry.seed_mini;
  const std::string& first = plan.front().mixer;
  for (const LayerPlan& layer : plan)
    if (layer.mixer != first) return preset;  // several mixers: the shared decoder sizes
  const MixerEntry* entry = find_mixer(first);
  if (!entry) return preset;  // make_mixer names the unknown mixer
  for (const auto& [key, value] : entry->seed_mini_alone_decoder) preset.decoder[key] = value;
  for (const auto& [key, value] : entry->seed_mini_alone) preset.by_mixer[first][key] = value;
  return preset;
}

std::optional<Preset> read_preset(Options& options, const std::vector<LayerPlan>& plan) {
  const std::optional<std::string> name = options.optional_string("preset");
  if (!name) return std::nullopt;
  if (*name == "seed-mini") return seed_mini(plan);
  if (*name == "small") return Preset{{{"d_model", option(64)}, {"heads", option(4)}}, {}};
  options.fail("preset", "must be one of seed-mini, small, got \"" + *name + "\"");
}

// torch::nn::LayerNorm's eps, which every run folder before `norm_eps` existed was built with.
constexpr double kDefaultNormEps = 1e-5;

// GELU's MLP has biases and SwiGLU's none, as memscript's and flash-linear-attention's blocks.
bool default_mlp_bias(bool swiglu) { return !swiglu; }

// mlp, mlp_bias, norm and norm_eps: the block around the mixer. `mlp_hidden` 0: no MLP half.
BlockShape read_block_shape(Options& options, int64_t mlp_hidden) {
  BlockShape shape;
  shape.mlp_hidden = mlp_hidden;
  shape.swiglu = options.string("mlp", "gelu", {"gelu", "swiglu"}) == "swiglu";
  if (shape.swiglu && mlp_hidden == 0)
    options.fail("mlp", "= \"swiglu\" needs an MLP, and mlp_ratio = 0 builds none");
  shape.mlp_bias = options.boolean("mlp_bias", default_mlp_bias(shape.swiglu));
  if (options.has("mlp_bias") && mlp_hidden == 0)
    options.fail("mlp_bias", std::string("= ") + (shape.mlp_bias ? "true" : "false") +
                                 " needs an MLP, and mlp_ratio = 0 builds none");
  shape.rms_norm = options.string("norm", "layer", {"layer", "rms"}) == "rms";
  shape.norm_eps = options.number("norm_eps", kDefaultNormEps, 0.0, 1.0);
  if (shape.norm_eps <= 0) options.fail("norm_eps", "must be above 0, got 0");
  return shape;
}

void set_defaults(Options& options, const OptionDefaults& defaults) {
  for (const auto& [key, value] : defaults) options.set_default(key, value);
}

}  // namespace

NormImpl::NormImpl(int64_t width, bool rms, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", torch::ones({width}));
  if (!rms) bias_ = register_parameter("bias", torch::zeros({width}));
}

// LayerNorm as one autograd node (ops/layer_norm), whose parameter gradients are the same bits
// with --threads 1 and --threads 2 (libtorch's own CPU layer_norm backward sums them per thread,
// which changes them around 1e-8 with the count); RMSNorm from composed ops, whose gradients
// libtorch gives the same bits at any thread count (a CLI test checks both).
torch::Tensor NormImpl::forward(const torch::Tensor& x) const {
  return ops::pre_norm(x, pre_norm());
}

BlockImpl::BlockImpl(Mixer mixer, const MixerContext& context, const BlockShape& shape)
    : mixer_(std::move(mixer)) {
  register_module("mixer", mixer_);
  mixer_norm_ =
      register_module("mixer_norm", Norm(context.d_model, shape.rms_norm, shape.norm_eps));
  if (shape.mlp_hidden == 0) return;
  mlp_norm_ = register_module("mlp_norm", Norm(context.d_model, shape.rms_norm, shape.norm_eps));
  const auto linear = [&](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(shape.mlp_bias));
  };
  if (shape.swiglu) {
    mlp_gate_ = register_module("mlp_gate", linear(context.d_model, shape.mlp_hidden));
    init_linear(mlp_gate_);
  }
  mlp_up_ = register_module("mlp_up", linear(context.d_model, shape.mlp_hidden));
  mlp_down_ = register_module("mlp_down", linear(shape.mlp_hidden, context.d_model));
  init_linear(mlp_up_);
  init_output_projection(mlp_down_, context.layers);
}

MixerOutput BlockImpl::forward(const torch::Tensor& x, const MixerState& state) {
  MixerOutput mixed = mix(x, state);
  mixed.y = residual_mlp(x, mixed.y);
  return mixed;
}

MixerOutput BlockImpl::mix(const torch::Tensor& x, const MixerState& state) {
  return mixer_->forward_normed(x, mixer_norm_->pre_norm(), state);
}

// The LayerNorm + GELU half runs as one fused node (ops/mlp_block; without biases, its composed
// reference); RMSNorm or SwiGLU from the separate fused ops.
torch::Tensor BlockImpl::residual_mlp(const torch::Tensor& x, const torch::Tensor& m) const {
  if (!mlp_up_) return x + m;
  if (!mlp_gate_ && !mlp_norm_->rms()) return ops::residual_mlp(x, m, mlp_weights());
  const torch::Tensor h = x + m;
  const torch::Tensor n = mlp_norm_->forward(h);
  const torch::Tensor hidden =
      mlp_gate_ ? ops::linear(mlp_gate_, n, ops::Activation::silu) * ops::linear(mlp_up_, n)
                : ops::linear(mlp_up_, n, ops::Activation::gelu);
  return h + ops::linear(mlp_down_, hidden);
}

torch::Tensor BlockImpl::forward_rows(const torch::Tensor& x, const torch::Tensor& rows) {
  const torch::Tensor m = mix(x, {}).y;
  const int64_t d = x.size(-1);
  // [1, n, d]: the rows as one sequence, the shape the MLP's kernels take.
  const torch::Tensor xr = x.reshape({-1, d}).index_select(0, rows).unsqueeze(0);
  const torch::Tensor mr = m.reshape({-1, d}).index_select(0, rows).unsqueeze(0);
  return residual_mlp(xr, mr);
}

ops::MlpWeights BlockImpl::mlp_weights() const {
  const ops::PreNorm norm = mlp_norm_->pre_norm();
  return {norm.weight,   norm.bias,         norm.eps,       mlp_up_->weight,
          mlp_up_->bias, mlp_down_->weight, mlp_down_->bias};
}

// Refuses a model whose parameters cannot fit before any is allocated. The count is a lower
// bound (embedding, head, each block's MLP and one d_model x d_model projection), so no model
// that fits is refused; the option named is the one that makes it large.
void DecoderImpl::check_parameters_fit(Options& options, int64_t layers) const {
  const double d = static_cast<double>(d_model_);
  const double embedding = static_cast<double>(vocab_) * d;
  const double head = static_cast<double>(classes_) * d;
  const double hidden = static_cast<double>(block_shape_.mlp_hidden);
  const double block = (2.0 * hidden + d) * d;
  const double positions = static_cast<double>(max_length_) * d;
  const double bytes = 4.0 * (embedding + positions + head + static_cast<double>(layers) * block);
  try {
    check_fits_in_memory(bytes, "the model's parameters");
  } catch (const UserError& error) {
    std::string key = "layers";
    int64_t value = layers;
    if (embedding >= head && embedding >= static_cast<double>(layers) * block) {
      key = vocab_ > d_model_ ? "vocab" : "d_model";
      value = vocab_ > d_model_ ? vocab_ : d_model_;
    } else if (head >= static_cast<double>(layers) * block) {
      key = classes_ > d_model_ ? "classes" : "d_model";
      value = classes_ > d_model_ ? classes_ : d_model_;
    } else if (layers <= d_model_ && hidden > d * d && mlp_hidden_given_) {
      key = "mlp_hidden";
      value = block_shape_.mlp_hidden;
    } else if (layers <= d_model_ && hidden > d * d) {
      key = "mlp_ratio";
      value = mlp_ratio_;
    } else if (layers <= d_model_) {
      key = "d_model";
      value = d_model_;
    }
    options.fail(key, "= " + std::to_string(value) + ": " + error.what());
  }
}

double DecoderImpl::min_step_bytes(int64_t batch, int64_t length, bool training) const {
  const double positions = static_cast<double>(batch) * static_cast<double>(length);
  const double stream = positions * static_cast<double>(d_model_) * 4.0;
  const double logits = positions * static_cast<double>(classes_) * 4.0;
  const double kept = training ? static_cast<double>(num_layers()) + 1.0 : 2.0;
  return stream * kept + logits * (training ? 2.0 : 1.0);
}

DecoderImpl::DecoderImpl(Options& options, const Task* task, uint64_t default_seed) {
  const int64_t task_vocab = task ? task->vocab_size() : 0;
  const int64_t task_classes = task ? task->num_classes() : 0;
  vocab_ = options.integer("vocab", task_vocab, {.min = 1});
  classes_ = options.integer("classes", task_classes, {.min = 1});
  if (vocab_ == 0) options.fail("vocab", "is required when no task = ... is given");
  if (classes_ == 0) options.fail("classes", "is required when no task = ... is given");
  if (task && vocab_ < task_vocab) {
    options.fail("vocab", "= " + std::to_string(vocab_) +
                              " is smaller than the vocabulary of task " + task->name() + " (" +
                              std::to_string(task_vocab) + ")");
  }
  if (task && classes_ != task_classes) {
    options.fail("classes", "= " + std::to_string(classes_) + " does not match task " +
                                task->name() + " (" + std::to_string(task_classes) + " classes)");
  }
  const std::vector<LayerPlan> plan = plan_layers(options);
  const bool ratio_given = options.has("mlp_ratio");  // by the user, not by a preset
  const std::optional<Preset> preset = read_preset(options, plan);
  if (preset) {
    set_defaults(options, preset->decoder);
    // Layers without a table of their own read the decoder's.
    for (const LayerPlan& layer : plan)
      if (!layer.options) set_defaults(options, preset->mixer(layer.mixer));
  }
  d_model_ = options.integer("d_model", 64, {.min = 1});
  heads_ = options.integer("heads", 4, {.min = 1});
  if (!options.has("head_dim") && d_model_ % heads_ != 0) {
    options.fail("heads", "= " + std::to_string(heads_) + " does not divide d_model = " +
                              std::to_string(d_model_) + " (or give head_dim)");
  }
  mlp_ratio_ = options.integer("mlp_ratio", 4, {.min = 0});
  int64_t mlp_hidden = mlp_ratio_ * d_model_;
  if (const auto hidden = options.optional_integer("mlp_hidden", {.min = 1, .max = 1 << 24})) {
    if (ratio_given) {
      options.fail("mlp_hidden",
                   "= " + std::to_string(*hidden) + " is given beside mlp_ratio; give one of them");
    }
    mlp_hidden = *hidden;
    mlp_hidden_given_ = true;
  }
  block_shape_ = read_block_shape(options, mlp_hidden);
  scale_embedding_ = options.boolean("scale_embedding", false);
  head_bias_ = options.boolean("head_bias", true);
  residual_positions_ = options.string("residual_positions", "none", {"none", "learned"});
  if (residual_positions_ == "learned") {
    max_length_ = options.integer("max_length", 1024, {.min = 1, .max = 1 << 24});
  }
  seed_ = static_cast<uint64_t>(
      options.integer("seed", static_cast<int64_t>(default_seed), {.min = 0}));
  check_parameters_fit(options, static_cast<int64_t>(plan.size()));

  // Parameters are drawn from torch's generator: seed it so a model is the same on every run.
  torch::manual_seed(seed_);
  embedding_ = register_module("embedding", torch::nn::Embedding(vocab_, d_model_));
  init_normal(embedding_->weight);
  if (max_length_ > 0) {
    positions_ = register_parameter("positions", torch::empty({max_length_, d_model_}));
    init_normal(positions_);
  }
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  const MixerContext context{d_model_, heads_, static_cast<int64_t>(plan.size())};
  for (const LayerPlan& layer : plan) {
    mixer_names_.push_back(layer.mixer);
    if (layer.options && preset) set_defaults(*layer.options, preset->mixer(layer.mixer));
    Options& mixer_options = layer.options ? *layer.options : options;
    blocks_->push_back(
        Block(make_mixer(layer.mixer, context, mixer_options), context, block_shape_));
    if (layer.options) layer.options->finish();
  }
  final_norm_ =
      register_module("final_norm", Norm(d_model_, block_shape_.rms_norm, block_shape_.norm_eps));
  head_ = register_module(
      "head", torch::nn::Linear(torch::nn::LinearOptions(d_model_, classes_).bias(head_bias_)));
  init_linear(head_);
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& tokens) {
  return forward(tokens, DecoderState{}).logits;
}

DecoderOutput DecoderImpl::forward(const torch::Tensor& tokens, const DecoderState& state) {
  if (!state.layers.empty() && state.layers.size() != blocks_->size()) {
    throw UserError("forward: the state has " + std::to_string(state.layers.size()) +
                    " layers, the model " + std::to_string(blocks_->size()));
  }
  if (tokens.size(-1) == 0) {  // nothing to read: no logits, and the state as it was
    const std::vector<int64_t> shape = {tokens.size(0), 0, classes_};
    return {torch::empty(shape, embedding_->weight.options()), state};
  }
  torch::Tensor x = embed(tokens, state.layers.empty() ? 0 : state.layers[0].position);
  DecoderOutput out;
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const MixerState layer_state = state.layers.empty() ? MixerState{} : state.layers[i];
    MixerOutput block = blocks_->ptr<BlockImpl>(i)->forward(x, layer_state);
    x = block.y;
    out.state.layers.push_back(std::move(block.state));
  }
  out.logits = ops::linear(head_, final_norm_->forward(x));
  out.state.mixers = mixer_names_;
  return out;
}

torch::Tensor DecoderImpl::forward_rows(const torch::Tensor& tokens, const torch::Tensor& rows) {
  torch::Tensor x = embed(tokens, 0);
  const size_t last = blocks_->size() - 1;
  for (size_t i = 0; i < last; ++i) x = blocks_->ptr<BlockImpl>(i)->forward(x, {}).y;
  x = blocks_->ptr<BlockImpl>(last)->forward_rows(x, rows);
  return ops::linear(head_, final_norm_->forward(x)).squeeze(0);
}

void DecoderImpl::check_state(const DecoderState& state, int64_t batch) {
  if (state.layers.empty()) return;
  if (state.layers.size() != blocks_->size()) {
    throw UserError("forward: the state has " + std::to_string(state.layers.size()) +
                    " layers, the model " + std::to_string(blocks_->size()));
  }
  // What a fresh state looks like after one token and after two: sizes that grow with the
  // position (an attention cache) grow linearly, the others stay.
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens =
      torch::zeros({batch, 2}, torch::TensorOptions(torch::kInt64).device(device()));
  const DecoderOutput one = forward(tokens.narrow(1, 0, 1), DecoderState{});
  const DecoderOutput two = forward(tokens.narrow(1, 1, 1), one.state);
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const MixerState& given = state.layers[i];
    const std::vector<torch::Tensor>& first = one.state.layers[i].tensors;
    const std::vector<torch::Tensor>& second = two.state.layers[i].tensors;
    const std::string layer = "forward: the state does not fit this model and batch " +
                              std::to_string(batch) +
                              " (from another model or batch size?): layer " +
                              std::to_string(i + 1) + " (" + mixer_names_[i] + ")";
    if (given.empty()) continue;  // this layer starts afresh
    if (i < state.mixers.size() && state.mixers[i] != mixer_names_[i])
      throw UserError(layer + " was given the state of a " + state.mixers[i] + " layer");
    if (given.tensors.size() != first.size() || given.position < 0) {
      throw UserError(layer + " keeps " + std::to_string(first.size()) + " tensors, the state " +
                      std::to_string(given.tensors.size()));
    }
    for (size_t j = 0; j < first.size(); ++j) {
      const torch::Tensor& tensor = given.tensors[j];
      std::vector<int64_t> expected(first[j].sizes().begin(), first[j].sizes().end());
      for (size_t d = 0; d < expected.size(); ++d)
        expected[d] +=
            (second[j].size(static_cast<int64_t>(d)) - expected[d]) * (given.position - 1);
      const bool fits = tensor.defined() && tensor.scalar_type() == first[j].scalar_type() &&
                        tensor.device() == first[j].device() && tensor.sizes().vec() == expected;
      if (!fits) {
        throw UserError(layer + " expects " + show_sizes(expected, first[j]) + " as state tensor " +
                        std::to_string(j + 1) + ", got " + show_sizes(tensor));
      }
    }
  }
}

torch::Tensor DecoderImpl::embed(const torch::Tensor& tokens, int64_t start) const {
  torch::Tensor x = ops::embedding(tokens, embedding_->weight);
  if (scale_embedding_) x = x * std::sqrt(static_cast<double>(d_model_));
  return positions_.defined() ? add_positions(x, start) : x;
}

torch::Tensor DecoderImpl::add_positions(const torch::Tensor& x, int64_t start) const {
  const int64_t length = x.size(1);
  if (start + length > max_length_) {
    throw UserError("forward: residual_positions = \"learned\" has positions for max_length = " +
                    std::to_string(max_length_) + " tokens, and this chunk of " +
                    std::to_string(length) + " after " + std::to_string(start) + " needs " +
                    std::to_string(start + length) + "; build the model with a larger max_length");
  }
  return x + positions_.narrow(0, start, length);
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& parameter : module.parameters()) total += parameter.numel();
  return total;
}

int64_t DecoderImpl::num_parameters() const { return count_parameters(*this); }

std::vector<ModelPart> DecoderImpl::describe() const {
  std::vector<ModelPart> parts;
  parts.push_back({"embedding", std::to_string(vocab_) + " x " + std::to_string(d_model_),
                   count_parameters(*embedding_)});
  if (positions_.defined()) {
    parts.push_back({"positions", std::to_string(max_length_) + " x " + std::to_string(d_model_),
                     positions_.numel()});
  }
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const auto& block = *blocks_->ptr<BlockImpl>(i);
    parts.push_back(
        {"block " + std::to_string(i + 1), block.mixer().config().dump(), count_parameters(block)});
  }
  parts.push_back({"final_norm", final_norm_->rms() ? "rms norm" : "layer norm",
                   count_parameters(*final_norm_)});
  parts.push_back({"head", std::to_string(d_model_) + " x " + std::to_string(classes_),
                   count_parameters(*head_)});
  return parts;
}

nlohmann::json DecoderImpl::config() const {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& block : *blocks_) layers.push_back(block->as<BlockImpl>()->mixer().config());
  nlohmann::json config = {{"model", "decoder"},
                           {"vocab", vocab_},
                           {"classes", classes_},
                           {"d_model", d_model_},
                           {"heads", heads_},
                           {"mlp_ratio", mlp_ratio_},
                           {"scale_embedding", scale_embedding_},
                           {"seed", seed_},
                           {"layers", layers},
                           {"parameters", num_parameters()}};
  // Written only when not the default, so that the configs (and the resumes) of run folders
  // written before these options stay as they were.
  if (mlp_hidden_given_) {  // in place of mlp_ratio, which it overrides
    config.erase("mlp_ratio");
    config["mlp_hidden"] = block_shape_.mlp_hidden;
  }
  if (!head_bias_) config["head_bias"] = false;
  if (block_shape_.swiglu) config["mlp"] = "swiglu";
  // Without an MLP it is the default: read_block_shape refuses mlp_bias beside mlp_ratio = 0.
  if (block_shape_.mlp_bias != default_mlp_bias(block_shape_.swiglu))
    config["mlp_bias"] = block_shape_.mlp_bias;
  if (block_shape_.rms_norm) config["norm"] = "rms";
  if (block_shape_.norm_eps != kDefaultNormEps) config["norm_eps"] = block_shape_.norm_eps;
  if (max_length_ > 0) {
    config["residual_positions"] = residual_positions_;
    config["max_length"] = max_length_;
  }
  return config;
}

std::string DecoderImpl::summary() const {
  return "decoder[" + join(mixer_names_, ", ") + "] d_model " + std::to_string(d_model_) + ", " +
         std::to_string(mixer_names_.size()) + " layers, " + std::to_string(num_parameters()) +
         " parameters";
}

ScoredLogits scored_logits(DecoderImpl& model, const torch::Tensor& inputs,
                           const torch::Tensor& targets, const torch::Tensor& mask) {
  const int64_t positions = mask.numel();
  const int64_t scored = mask.sum().item<int64_t>();
  if (scored == 0 || 2 * scored > positions)
    return {model.forward(inputs), targets, mask, {}, scored};
  const torch::Tensor rows = mask.reshape({-1}).nonzero().squeeze(1);
  const torch::Tensor logits = model.forward_rows(inputs, rows).unsqueeze(0);
  const torch::Tensor picked = targets.reshape({-1}).index_select(0, rows).unsqueeze(0);
  return {logits, picked, torch::ones_like(picked, mask.options()), rows, scored};
}

torch::Tensor masked_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                                       const torch::Tensor& mask) {
  return ops::masked_cross_entropy(logits, targets, mask, ops::LossReduction::sum);
}

torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                   const torch::Tensor& mask) {
  return ops::masked_cross_entropy(logits, targets, mask, ops::LossReduction::mean);
}

}  // namespace memscript
