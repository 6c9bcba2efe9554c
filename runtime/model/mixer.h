#pragma once

// A token mixer: the part of a decoder block that moves information along the sequence.
// Every mixer maps [batch, length, d_model] to the same shape, causally, and hands back the
// state it needs to continue: a sequence fed in chunks gives the same outputs as one pass.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/model/fused/layer_norm.h"
#include "runtime/options.h"
#include "runtime/torch.h"

namespace memscript {

// What every mixer is told about the decoder it sits in.
struct MixerContext {
  int64_t d_model;
  int64_t heads;
  int64_t layers;  // for the 1/sqrt(2 * layers) scaling of output projections
};

// What a mixer carries from one chunk to the next: recurrent states, a convolution's last
// inputs, or the keys and values seen so far. `tensors` empty means the sequence starts here.
struct MixerState {
  std::vector<torch::Tensor> tensors;
  int64_t position = 0;  // tokens seen before this chunk

  bool empty() const { return tensors.empty(); }
};

struct MixerOutput {
  torch::Tensor y;   // [batch, length, d_model]
  MixerState state;  // after the last token of the chunk
};

class MixerImpl : public torch::nn::Module {
 public:
  // x: [batch, length, d_model]; state: what the previous chunk returned, or {}.
  virtual MixerOutput forward(const torch::Tensor& x, const MixerState& state) = 0;
  // forward(LN(x), state) with the decoder block's pre-norm `norm`. A mixer that can fuse the
  // norm into its own kernel overrides it; the result is the same function of x either way.
  virtual MixerOutput forward_normed(const torch::Tensor& x, const fused::PreNorm& norm,
                                     const MixerState& state);
  // The options as resolved, for the run folder and describe().
  virtual nlohmann::json config() const = 0;

  torch::Tensor forward(const torch::Tensor& x) { return forward(x, MixerState{}).y; }
};

using Mixer = std::shared_ptr<MixerImpl>;

// Builds a mixer by name, reading (and checking) its own options from `options`.
Mixer make_mixer(const std::string& name, const MixerContext& context, Options& options);
std::vector<std::string> mixer_names();

// normal(0, 0.02) for a projection that writes back into the residual stream, scaled down by
// sqrt(2 * layers) so the residual's variance does not grow with depth.
void init_output_projection(torch::nn::Linear& projection, int64_t layers);

}  // namespace memscript
