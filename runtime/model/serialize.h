#pragma once

// A model file: the decoder's resolved configuration and its weights in one libtorch archive,
// so `load` rebuilds the same architecture without the script that made it.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/model/decoder.h"

namespace memscript {

// Writes atomically (a temporary file, then a rename).
void save_decoder(DecoderImpl& model, const std::filesystem::path& path);
Decoder load_decoder(const std::filesystem::path& path);

// Reads `archive` (as torch::nn::Module::save wrote it) into `model`'s parameters and buffers in
// place. Unlike Module::load, which adopts whatever tensor the file holds, every tensor must
// have the shape and dtype the model was built with: the mixers' kernels index by the shapes
// their options imply, so a file whose weights disagree with its configuration (written by hand,
// or by a stranger) gets one UserError line naming `source` and the tensor, never a kernel
// reading past a buffer.
void load_weights(torch::nn::Module& model, torch::serialize::InputArchive& archive,
                  const std::string& source);

// The options that rebuild a decoder from its config() (weights aside).
Options decoder_options_from_config(const nlohmann::json& config);

}  // namespace memscript
