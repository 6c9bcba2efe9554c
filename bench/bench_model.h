#pragma once

// What the mixer benchmarks share: the decoders they time (a mixer at a preset on bit parity,
// built through the same options a script gives), the list of mixers, and small parsing helpers
// for their command lines. Never used by tests or the interpreter.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/decoder.h"
#include "runtime/task.h"

namespace memscript::bench {

// Every mixer, and those that carry a state of fixed size (the registry's, mixer.cpp).
const std::vector<std::string>& all_mixers();
const std::vector<std::string>& recurrent_mixers();

struct BenchModel {
  std::shared_ptr<Task> task;
  Decoder model{nullptr};
  // The implementation the mixers report in their config(): `impl` as asked for, or
  // "reference" when this build's mixers do not know the option yet (they then ignore it).
  std::string impl;
};

// A preset's width and heads replaced (0: the preset's own), e.g. Zoology's one head of 128.
struct Widths {
  int64_t d_model = 0;
  int64_t heads = 0;

  bool any() const { return d_model > 0 || heads > 0; }
};

// ms.model.decoder{ mixer = mixer, preset = preset, impl = impl, task = parity }, able to read
// `length` tokens: a model whose preset adds learned positions to the residual stream gets
// max_length = length where its default (1024) is too short.
BenchModel build_model(const std::string& mixer, const std::string& preset, const std::string& impl,
                       int64_t length, const Widths& widths = {});

// "a,b,c" -> {"a", "b", "c"}; empty items dropped.
std::vector<std::string> split_list(const std::string& text);
std::vector<int64_t> split_integers(const std::string& text);

// The environment variable's value, or `fallback` when unset or empty: lets `make bench`
// run a subset (MEMSCRIPT_BENCH_MIXERS=deltanet,mamba make bench).
std::string env_or(const char* name, const std::string& fallback);

// `text` in single quotes for /bin/sh.
std::string shell_quote(const std::string& text);

// Peak resident memory of this process so far (getrusage ru_maxrss), in MiB.
double peak_rss_mib();

}  // namespace memscript::bench
