#pragma once

// A token mixer: the part of a decoder block that moves information along the sequence.
// Every mixer maps [batch, length, d_model] to the same shape, causally.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/options.h"
#include "runtime/torch.h"

namespace memscript {

// What every mixer is told about the decoder it sits in.
struct MixerContext {
  int64_t d_model;
  int64_t heads;
  int64_t layers;  // for the 1/sqrt(2 * layers) scaling of output projections
};

class MixerImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // The options as resolved, for the run folder and describe().
  virtual nlohmann::json config() const = 0;
};

using Mixer = std::shared_ptr<MixerImpl>;

// Builds a mixer by name, reading (and checking) its own options from `options`.
Mixer make_mixer(const std::string& name, const MixerContext& context, Options& options);
std::vector<std::string> mixer_names();

// normal(0, 0.02) for a projection that writes back into the residual stream, scaled down by
// sqrt(2 * layers) so the residual's variance does not grow with depth.
void init_output_projection(torch::nn::Linear& projection, int64_t layers);

}  // namespace memscript
