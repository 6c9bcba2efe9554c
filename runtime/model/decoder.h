#pragma once

// The generic pre-norm decoder whose token mixer is swapped:
//   embedding (optionally * sqrt(d_model)) -> N x [x + mixer(N(x)); x + MLP(N(x))]
//   -> N -> linear head over the task's classes.
// N is LayerNorm, or RMSNorm with `norm = "rms"`; the MLP is W_down gelu(W_up h) with biases, or
// with `mlp = "swiglu"` W_down (silu(W_gate h) * W_up h) without (flash-linear-attention's and
// LLaMA's block, which Grazzi et al. train).
// Linear and embedding weights start from normal(0, 0.02); projections back into the
// residual stream are scaled by 1/sqrt(2 * layers).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/model/mixer.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/mlp_block/mlp_block.h"
#include "runtime/task.h"

namespace memscript {

// A block's norms (and the final one): LayerNorm (weight and bias) or RMSNorm (weight alone,
// x / sqrt(mean(x²) + eps) * w). Its parameters are named as torch::nn::LayerNorm's.
class NormImpl : public torch::nn::Module {
 public:
  NormImpl(int64_t width, bool rms, double eps);
  torch::Tensor forward(const torch::Tensor& x) const;
  bool rms() const { return !bias_.defined(); }
  ops::PreNorm pre_norm() const { return {weight_, bias_, eps_}; }

 private:
  torch::Tensor weight_, bias_;
  double eps_;
};
TORCH_MODULE(Norm);

// What a block is besides its mixer.
struct BlockShape {
  int64_t mlp_hidden = 0;  // 0: no MLP half (and no second norm): x + mixer(N(x))
  bool rms_norm = false;
  double norm_eps = 1e-5;
  bool swiglu = false;
  bool mlp_bias = true;  // the MLP's projections have biases (default: GELU's do, SwiGLU's not)
};

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(Mixer mixer, const MixerContext& context, const BlockShape& shape);
  // x and the block's output: [batch, length, d_model].
  MixerOutput forward(const torch::Tensor& x, const MixerState& state);
  // The output at the flat positions `rows` of x only, [1, n, d_model], from no state: the mixer
  // reads all of x, the MLP half runs on the n rows.
  torch::Tensor forward_rows(const torch::Tensor& x, const torch::Tensor& rows);
  const MixerImpl& mixer() const { return *mixer_; }

 private:
  MixerOutput mix(const torch::Tensor& x, const MixerState& state);
  // x + m, then the MLP half with its residual.
  torch::Tensor residual_mlp(const torch::Tensor& x, const torch::Tensor& m) const;
  ops::MlpWeights mlp_weights() const;

  Mixer mixer_;
  Norm mixer_norm_{nullptr};
  Norm mlp_norm_{nullptr};
  torch::nn::Linear mlp_gate_{nullptr};  // swiglu only
  torch::nn::Linear mlp_up_{nullptr};
  torch::nn::Linear mlp_down_{nullptr};
};
TORCH_MODULE(Block);

// One row of describe(): a named part of the model and its parameter count.
struct ModelPart {
  std::string name;
  std::string what;
  int64_t parameters;
};

// The state of every layer after a chunk; empty at the start of a sequence.
struct DecoderState {
  std::vector<MixerState> layers;
  std::vector<std::string> mixers;  // the mixer of each layer that left it, for check_state
};

struct DecoderOutput {
  torch::Tensor logits;  // [batch, length, classes]
  DecoderState state;
};

class DecoderImpl : public torch::nn::Module {
 public:
  // Reads the decoder's options (mixer, layers, d_model, heads, mlp_ratio (0: no MLP) or
  // mlp_hidden (the MLP's hidden width, in its place), mlp ("gelu" or "swiglu"), mlp_bias, norm
  // ("layer" or "rms"), norm_eps, scale_embedding, head_bias, residual_positions ("none" or
  // "learned": a max_length x d_model table added to the embeddings), max_length, vocab, classes,
  // seed) and each mixer's own options. `task`, if given, supplies vocab and classes.
  DecoderImpl(Options& options, const Task* task, uint64_t default_seed);

  // tokens: int64 [batch, length] -> logits [batch, length, classes]
  torch::Tensor forward(const torch::Tensor& tokens);
  // The same, continuing from `state` (what the previous chunk returned, or {}).
  DecoderOutput forward(const torch::Tensor& tokens, const DecoderState& state);
  // The logits at the flat positions `rows` (int64 [n], indices into batch x length, row-major)
  // only: [n, classes]. The last block's position-wise half (the MLP), the final norm and the
  // head run on those rows alone; the mixers still read every position.
  torch::Tensor forward_rows(const torch::Tensor& tokens, const torch::Tensor& rows);
  // Throws UserError unless `state` is one this model leaves for `batch` sequences (the kernels
  // trust a state's sizes): a state from another model, batch size or dtype is refused.
  void check_state(const DecoderState& state, int64_t batch);

  int64_t vocab_size() const { return vocab_; }
  // Where the parameters live (inputs must be moved there).
  torch::Device device() const { return embedding_->weight.device(); }
  int64_t num_classes() const { return classes_; }
  int64_t num_parameters() const;
  int64_t d_model() const { return d_model_; }
  int64_t num_layers() const { return static_cast<int64_t>(mixer_names_.size()); }
  // A lower bound on the memory one forward (and, when training, backward) of `batch`
  // sequences of `length` takes: the residual stream kept for every block and the logits.
  double min_step_bytes(int64_t batch, int64_t length, bool training) const;
  std::vector<ModelPart> describe() const;
  nlohmann::json config() const;
  std::string summary() const;  // one line: mixers, sizes and parameter count

 private:
  void check_parameters_fit(Options& options, int64_t layers) const;
  // The blocks' input: token embeddings, scaled and with positions from `start` as configured.
  torch::Tensor embed(const torch::Tensor& tokens, int64_t start) const;
  torch::Tensor add_positions(const torch::Tensor& x, int64_t start) const;

  int64_t vocab_;
  int64_t classes_;
  int64_t d_model_;
  int64_t heads_;
  int64_t mlp_ratio_;
  bool mlp_hidden_given_ = false;  // the MLP's width given as mlp_hidden, not mlp_ratio
  BlockShape block_shape_;
  bool scale_embedding_;
  bool head_bias_;
  std::string residual_positions_;
  int64_t max_length_ = 0;  // rows of positions_ (residual_positions = "learned")
  uint64_t seed_;
  std::vector<std::string> mixer_names_;
  torch::nn::Embedding embedding_{nullptr};
  torch::Tensor positions_;  // [max_length, d_model], or undefined
  torch::nn::ModuleList blocks_{nullptr};
  Norm final_norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Decoder);

// What a loss and its accuracy read: the logits with their targets and mask, either of the whole
// batch ([B, L, C], [B, L], [B, L]) or, where at most half of the positions are scored
// (answer-only tasks, recall queries), of the scored positions alone ([1, n, C], [1, n], ones):
// the readout then skips the rest. Training, evaluation and m:loss read through this.
struct ScoredLogits {
  torch::Tensor logits, targets, mask;
  torch::Tensor rows;  // the flat positions read out, int64 [n]; undefined: the whole batch
  int64_t scored = 0;  // how many positions the mask scores
};
ScoredLogits scored_logits(DecoderImpl& model, const torch::Tensor& inputs,
                           const torch::Tensor& targets, const torch::Tensor& mask);

// Cross-entropy over the scored positions only. logits [B, L, C], targets [B, L], mask [B, L].
torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                   const torch::Tensor& mask);
// The same summed instead of averaged, for evaluations that average over many batches.
torch::Tensor masked_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                                       const torch::Tensor& mask);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace memscript
