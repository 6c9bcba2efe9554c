#include "runtime/model/mixer.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/mixers/deltanet.h"
#include "runtime/model/mixers/gated_deltanet.h"
#include "runtime/model/mixers/gpt.h"
#include "runtime/model/mixers/linear_attention.h"
#include "runtime/model/mixers/lru.h"
#include "runtime/model/mixers/lstm.h"
#include "runtime/model/mixers/mamba.h"
#include "runtime/model/mixers/mingru.h"
#include "runtime/model/mixers/qlstm.h"
#include "runtime/model/mixers/short_conv.h"

namespace memscript {

// Mixers without a header of their own: nothing but this table uses their classes.
Mixer make_gla_mixer(const MixerContext& context, Options& options);     // mixers/gla.cpp
Mixer make_retnet_mixer(const MixerContext& context, Options& options);  // mixers/retnet.cpp

const std::vector<MixerEntry>& mixer_entries() {
  // The seed-mini options are the study's (docs/study.md): every mixer but the LRU and Mamba
  // at head_dim 4 (d_model 4); the attention-like mixers with learned positions in the residual
  // stream (gpt none of its own); Mamba without an MLP; the LRU at d_model 128 with an MLP of 128.
  static const std::vector<MixerEntry> entries = {
      {.name = "deltanet",
       .make = make_deltanet_mixer,
       .recurrent = true,
       .negative_eigenvalues = true,
       .short_conv = true,
       .seed_mini = {{"head_dim", option(4)}, {"qkv_bias", option(true)}},
       .seed_mini_alone_decoder = {{"residual_positions", option("learned")}}},
      {.name = "gated_deltanet",
       .make = make_gated_deltanet_mixer,
       .recurrent = true,
       .negative_eigenvalues = true,
       .short_conv = true,
       .seed_mini = {{"head_dim", option(4)}}},
      {.name = "gla",
       .make = make_gla_mixer,
       .recurrent = true,
       .negative_eigenvalues = false,
       .short_conv = true,
       .seed_mini = {{"head_dim", option(4)}}},
      {.name = "gpt",
       .make = make_gpt_mixer,
       .recurrent = false,
       .negative_eigenvalues = false,
       .short_conv = true,
       .seed_mini = {{"head_dim", option(4)}},
       .seed_mini_alone_decoder = {{"residual_positions", option("learned")}},
       .seed_mini_alone = {{"positions", option("none")}}},
      {.name = "linear_attention",
       .make = make_linear_attention_mixer,
       .recurrent = true,
       .negative_eigenvalues = false,
       .short_conv = true,
       .seed_mini = {{"head_dim", option(4)}, {"qkv_bias", option(true)}},
       .seed_mini_alone_decoder = {{"residual_positions", option("learned")}}},
      {.name = "lru",
       .make = make_lru_mixer,
       .recurrent = true,
       .negative_eigenvalues = true,
       .short_conv = false,
       .seed_mini = {{"d_state", option(4)}},
       .seed_mini_alone_decoder = {{"d_model", option(128)}, {"mlp_ratio", option(1)}}},
      {.name = "lstm",
       .make = make_lstm_mixer,
       .recurrent = true,
       .negative_eigenvalues = false,
       .short_conv = false,
       .seed_mini = {{"hidden", option(16)}, {"init", option("normal")}}},
      {.name = "mamba",
       .make = make_mamba_mixer,
       .recurrent = true,
       .negative_eigenvalues = true,
       .short_conv = false,
       .seed_mini = {{"d_state", option(8)},
                     {"d_conv", option(3)},
                     {"expand", option(2)},
                     {"dt_rank", option(1)}},
       .seed_mini_alone_decoder = {{"mlp_ratio", option(0)}}},
      {.name = "mingru",
       .make = make_mingru_mixer,
       .recurrent = true,
       .negative_eigenvalues = true,
       .short_conv = false},
      {.name = "qlstm",
       .make = make_qlstm_mixer,
       .recurrent = true,
       .negative_eigenvalues = true,
       .short_conv = false,
       .seed_mini = {{"hidden", option(16)}, {"gate_bias", option(true)}}},
      {.name = "retnet",
       .make = make_retnet_mixer,
       .recurrent = true,
       .negative_eigenvalues = false,
       .short_conv = false,
       .seed_mini = {{"head_dim", option(4)}}},
  };
  return entries;
}

namespace {
// The scopes alive on this thread, innermost last.
thread_local std::vector<const ScriptMixers*> script_scopes;

const MixerEntry* find_script_mixer(const std::string& name) {
  for (auto it = script_scopes.rbegin(); it != script_scopes.rend(); ++it)
    if (const MixerEntry* entry = (*it)->find(name)) return entry;
  return nullptr;
}

const MixerEntry* find_builtin(const std::string& name) {
  for (const MixerEntry& entry : mixer_entries())
    if (entry.name == name) return &entry;
  return nullptr;
}
}  // namespace

const MixerEntry* find_mixer(const std::string& name) {
  if (const MixerEntry* entry = find_builtin(name)) return entry;
  return find_script_mixer(name);
}

void ScriptMixers::define(MixerEntry entry) {
  if (find_builtin(entry.name))
    throw UserError("mixer '" + entry.name + "' is a built-in mixer; choose another name");
  if (find(entry.name)) throw UserError("mixer '" + entry.name + "' is already defined");
  entries_.push_back(std::make_unique<MixerEntry>(std::move(entry)));
}

const MixerEntry* ScriptMixers::find(const std::string& name) const {
  for (const auto& entry : entries_)
    if (entry->name == name) return entry.get();
  return nullptr;
}

std::vector<std::string> ScriptMixers::names() const {
  std::vector<std::string> names;
  for (const auto& entry : entries_) names.push_back(entry->name);
  return names;
}

ScriptMixerScope::ScriptMixerScope(const ScriptMixers* mixers) : mixers_(mixers) {
  script_scopes.push_back(mixers);
}

ScriptMixerScope::~ScriptMixerScope() {
  const auto it = std::find(script_scopes.rbegin(), script_scopes.rend(), mixers_);
  if (it != script_scopes.rend()) script_scopes.erase(std::next(it).base());
}

std::vector<std::string> mixer_names() {
  return mixer_names_where([](const MixerEntry&) { return true; });
}

std::vector<std::string> mixer_names_where(bool (*wanted)(const MixerEntry&)) {
  std::vector<std::string> names;
  for (const MixerEntry& entry : mixer_entries())
    if (wanted(entry)) names.push_back(entry.name);
  return names;
}

MixerOutput MixerImpl::forward_normed(const torch::Tensor& x, const ops::PreNorm& norm,
                                      const MixerState& state) {
  return forward(ops::layer_norm(x, norm.weight, norm.bias, norm.eps), state);
}

Mixer make_mixer(const std::string& name, const MixerContext& context, Options& options) {
  const MixerEntry* found = find_mixer(name);
  if (!found) {
    std::vector<std::string> names = mixer_names();
    for (const ScriptMixers* scope : script_scopes) {
      for (const std::string& own : scope->names()) names.push_back(own);
    }
    std::string hint;
    if (auto guess = closest_match(name, names)) hint = " (did you mean '" + *guess + "'?)";
    options.fail("mixer", "is \"" + name + "\", which is not a mixer" + hint +
                              "; mixers: " + join(names, ", "));
  }
  return with_short_conv(found->make(context, options), *found, context, options);
}

void init_output_projection(torch::nn::Linear& projection, int64_t layers) {
  torch::NoGradGuard no_grad;
  projection->weight.normal_(0.0, 0.02 / std::sqrt(2.0 * static_cast<double>(layers)));
  if (projection->bias.defined()) projection->bias.zero_();
}

}  // namespace memscript
