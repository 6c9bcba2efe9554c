#include "runtime/model/mixer.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/short_conv.h"

namespace memscript {

// Every mixers/<name>.cpp defines <name>_entry(); the build lists the files
// (memscript_mixers.inc, written by runtime/CMakeLists.txt), so a new mixer is one new file.
#define MEMSCRIPT_MIXER(name) MixerEntry name##_entry();
#include "memscript_mixers.inc"
#undef MEMSCRIPT_MIXER

const std::vector<MixerEntry>& mixer_entries() {
  static const std::vector<MixerEntry> entries = {
#define MEMSCRIPT_MIXER(name) name##_entry(),
#include "memscript_mixers.inc"
#undef MEMSCRIPT_MIXER
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
  return forward(ops::pre_norm(x, norm), state);
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
