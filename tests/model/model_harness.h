#pragma once

// Builds decoders for the model tests from a handful of options, and compares tensors.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "runtime/model/decoder.h"

namespace memscript::test {

using ExtraOptions = std::map<std::string, OptionValue>;

inline Decoder make_decoder(const std::string& mixer, int64_t d_model = 16, int64_t heads = 2,
                            int64_t layers = 2, const ExtraOptions& extra = {}) {
  Options options("test decoder");
  options.set("mixer", {mixer});
  options.set("d_model", {d_model});
  options.set("heads", {heads});
  options.set("layers", {layers});
  options.set("vocab", {int64_t{4}});
  options.set("classes", {int64_t{3}});
  for (const auto& [key, value] : extra) options.set(key, value);
  Decoder model(std::make_shared<DecoderImpl>(options, nullptr, 1));
  options.finish();
  return model;
}

// deltanet's and gated_deltanet's options for flash-linear-attention's DeltaNet layer, as far as
// memscript has it (Grazzi et al.'s model): convolutions of `kernel` on q, k and v, no bias on β,
// the output norm, eigenvalues in (−1, 1).
inline ExtraOptions fla_deltanet_options(int64_t kernel) {
  return {{"qkv_conv", {kernel}},
          {"beta_bias", {false}},
          {"o_norm", {true}},
          {"negative_eigenvalues", {true}}};
}

// The model `preset` builds for `mixer` over a vocabulary and classes of the given sizes.
inline Decoder make_preset_decoder(const std::string& mixer, const std::string& preset,
                                   int64_t vocab, int64_t classes, int64_t seed = 1) {
  Options options("test decoder");
  options.set("mixer", {mixer});
  options.set("preset", {preset});
  options.set("vocab", {vocab});
  options.set("classes", {classes});
  Decoder model(std::make_shared<DecoderImpl>(options, nullptr, static_cast<uint64_t>(seed)));
  options.finish();
  return model;
}

// max |a − b| relative to max |b| (or absolute where b is all but zero).
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-6);
  return (a - b).abs().max().item<double>() / scale;
}

// `actual` is `expected` to `tolerance` (relative_error), or both are undefined; `what` names
// the pair in a failure.
inline void require_close(const torch::Tensor& actual, const torch::Tensor& expected,
                          double tolerance, const std::string& what) {
  INFO(what);
  REQUIRE(actual.defined() == expected.defined());
  if (!expected.defined()) return;
  REQUIRE(actual.sizes() == expected.sizes());
  if (expected.numel() > 0) CHECK(relative_error(actual, expected) <= tolerance);
}

inline torch::Tensor random_tokens(int64_t batch, int64_t length, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  return torch::randint(0, 4, {batch, length}, torch::kInt64);
}

// The logits of `tokens` fed in chunks that end at `cuts` (the last cut is the length), each
// chunk continuing from the previous one's state.
inline torch::Tensor chunked_logits(Decoder& model, const torch::Tensor& tokens,
                                    const std::vector<int64_t>& cuts) {
  using torch::indexing::Slice;
  DecoderState state;
  std::vector<torch::Tensor> pieces;
  int64_t start = 0;
  for (const int64_t end : cuts) {
    DecoderOutput out = model->forward(tokens.index({Slice(), Slice(start, end)}), state);
    pieces.push_back(out.logits);
    state = std::move(out.state);
    start = end;
  }
  return torch::cat(pieces, 1);
}

}  // namespace memscript::test
