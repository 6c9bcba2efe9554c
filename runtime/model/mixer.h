#pragma once

// A token mixer: the part of a decoder block that moves information along the sequence.
// Every mixer maps [batch, length, d_model] to the same shape, causally, and hands back the
// state it needs to continue: a sequence fed in chunks gives the same outputs as one pass.

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/ops/layer_norm/layer_norm.h"
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
  // forward(N(x), state) with the decoder block's pre-norm N, `norm` (LayerNorm or RMSNorm). A
  // mixer that can fuse the norm into its own kernel overrides it; the result is the same
  // function of x either way.
  virtual MixerOutput forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                                     const MixerState& state);
  // The options as resolved, for the run folder and describe().
  virtual nlohmann::json config() const = 0;

  torch::Tensor forward(const torch::Tensor& x) { return forward(x, MixerState{}).y; }
};

using Mixer = std::shared_ptr<MixerImpl>;

using OptionDefaults = std::map<std::string, OptionValue>;

using MixerFactory = std::function<Mixer(const MixerContext&, Options&)>;

// One mixer as the rest of memscript knows it: how to build it, and what the presets, the
// benchmarks and the tests read about it. Every built-in mixer has one entry, in mixer.cpp;
// nothing else lists mixers. A script's own mixers (ms.mixer.define) have entries in its
// ScriptMixers.
struct MixerEntry {
  std::string name;  // mixer = "<name>"
  MixerFactory make;
  bool recurrent;             // a state of fixed size whatever the length (all but attention)
  bool negative_eigenvalues;  // takes negative_eigenvalues = true
  bool short_conv;            // takes short_conv = K (it projects q, k and v)
  // Preset seed-mini, the study's configuration (docs/study.md): this mixer's options in any
  // model, and the decoder's and its own when every layer is this mixer.
  OptionDefaults seed_mini = {};
  OptionDefaults seed_mini_alone_decoder = {};
  OptionDefaults seed_mini_alone = {};
};

// Every built-in mixer, by name.
const std::vector<MixerEntry>& mixer_entries();
// The entry of `name`: a built-in's, else the current script's (ScriptMixerScope); or null.
const MixerEntry* find_mixer(const std::string& name);
// The built-in mixers' names.
std::vector<std::string> mixer_names();
// The names of the entries for which `wanted` holds.
std::vector<std::string> mixer_names_where(bool (*wanted)(const MixerEntry&));

// The mixers one script defines, kept by its interpreter for as long as the script runs.
class ScriptMixers {
 public:
  // Throws a UserError when `entry.name` is a built-in's or already defined.
  void define(MixerEntry entry);
  const MixerEntry* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<MixerEntry>> entries_;  // stable addresses for find_mixer
};

// While a scope lives, find_mixer and make_mixer on this thread also know `mixers`' entries
// (the interpreter holds one for as long as it lives; the innermost scope is searched first).
class ScriptMixerScope {
 public:
  explicit ScriptMixerScope(const ScriptMixers* mixers);
  ~ScriptMixerScope();
  ScriptMixerScope(const ScriptMixerScope&) = delete;
  ScriptMixerScope& operator=(const ScriptMixerScope&) = delete;

 private:
  const ScriptMixers* mixers_;
};

// Builds a mixer by name, reading (and checking) its own options from `options`.
Mixer make_mixer(const std::string& name, const MixerContext& context, Options& options);

// normal(0, 0.02) for a projection that writes back into the residual stream, scaled down by
// sqrt(2 * layers) so the residual's variance does not grow with depth.
void init_output_projection(torch::nn::Linear& projection, int64_t layers);

}  // namespace memscript
