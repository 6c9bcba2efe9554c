#include "runtime/model/decoder.h"

#include <cmath>

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

}  // namespace

BlockImpl::BlockImpl(Mixer mixer, const MixerContext& context, int64_t mlp_hidden)
    : mixer_(std::move(mixer)) {
  register_module("mixer", mixer_);
  const std::vector<int64_t> shape = {context.d_model};
  mixer_norm_ =
      register_module("mixer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions(shape)));
  mlp_norm_ = register_module("mlp_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions(shape)));
  mlp_up_ = register_module("mlp_up", torch::nn::Linear(context.d_model, mlp_hidden));
  mlp_down_ = register_module("mlp_down", torch::nn::Linear(mlp_hidden, context.d_model));
  init_linear(mlp_up_);
  init_output_projection(mlp_down_, context.layers);
}

MixerOutput BlockImpl::forward(const torch::Tensor& x, const MixerState& state) {
  MixerOutput mixed = mixer_->forward(mixer_norm_->forward(x), state);
  const torch::Tensor h = x + mixed.y;
  mixed.y = h + mlp_down_->forward(torch::gelu(mlp_up_->forward(mlp_norm_->forward(h))));
  return mixed;
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
  d_model_ = options.integer("d_model", 64, {.min = 1});
  const int64_t layers = options.integer("layers", 2, {.min = 1});
  heads_ = options.integer("heads", 4, {.min = 1});
  if (d_model_ % heads_ != 0) {
    options.fail("heads", "= " + std::to_string(heads_) +
                              " does not divide d_model = " + std::to_string(d_model_));
  }
  mlp_ratio_ = options.integer("mlp_ratio", 4, {.min = 1});
  scale_embedding_ = options.boolean("scale_embedding", false);
  seed_ = static_cast<uint64_t>(
      options.integer("seed", static_cast<int64_t>(default_seed), {.min = 0}));
  const std::vector<std::string> names = read_mixer_names(options);

  // Parameters are drawn from torch's generator: seed it so a model is the same on every run.
  torch::manual_seed(seed_);
  embedding_ = register_module("embedding", torch::nn::Embedding(vocab_, d_model_));
  init_normal(embedding_->weight);
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  const MixerContext context{d_model_, heads_, layers};
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string& name = names[static_cast<size_t>(layer) % names.size()];
    mixer_names_.push_back(name);
    blocks_->push_back(Block(make_mixer(name, context, options), context, mlp_ratio_ * d_model_));
  }
  final_norm_ = register_module(
      "final_norm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions(std::vector<int64_t>{d_model_})));
  head_ = register_module("head", torch::nn::Linear(d_model_, classes_));
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
  torch::Tensor x = embedding_->forward(tokens);
  if (scale_embedding_) x = x * std::sqrt(static_cast<double>(d_model_));
  DecoderOutput out;
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const MixerState layer_state = state.layers.empty() ? MixerState{} : state.layers[i];
    MixerOutput block = blocks_->ptr<BlockImpl>(i)->forward(x, layer_state);
    x = block.y;
    out.state.layers.push_back(std::move(block.state));
  }
  out.logits = head_->forward(final_norm_->forward(x));
  return out;
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
  for (size_t i = 0; i < blocks_->size(); ++i) {
    const auto& block = *blocks_->ptr<BlockImpl>(i);
    parts.push_back(
        {"block " + std::to_string(i + 1), block.mixer().config().dump(), count_parameters(block)});
  }
  parts.push_back({"final_norm", "layer norm", count_parameters(*final_norm_)});
  parts.push_back({"head", std::to_string(d_model_) + " x " + std::to_string(classes_),
                   count_parameters(*head_)});
  return parts;
}

nlohmann::json DecoderImpl::config() const {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& block : *blocks_) layers.push_back(block->as<BlockImpl>()->mixer().config());
  return {{"model", "decoder"},
          {"vocab", vocab_},
          {"classes", classes_},
          {"d_model", d_model_},
          {"heads", heads_},
          {"mlp_ratio", mlp_ratio_},
          {"scale_embedding", scale_embedding_},
          {"seed", seed_},
          {"layers", layers},
          {"parameters", num_parameters()}};
}

std::string DecoderImpl::summary() const {
  return "decoder[" + join(mixer_names_, ", ") + "] d_model " + std::to_string(d_model_) + ", " +
         std::to_string(mixer_names_.size()) + " layers, " + std::to_string(num_parameters()) +
         " parameters";
}

torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                   const torch::Tensor& mask) {
  const torch::Tensor losses = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  const torch::Tensor weights = mask.reshape({-1}).to(losses.scalar_type());
  return (losses * weights).sum() / weights.sum().clamp_min(1.0);
}

}  // namespace memscript
