#pragma once

// A model file: the decoder's resolved configuration and its weights in one libtorch archive,
// so `load` rebuilds the same architecture without the script that made it.

#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/model/decoder.h"

namespace memscript {

// Writes atomically (a temporary file, then a rename).
void save_decoder(DecoderImpl& model, const std::filesystem::path& path);
Decoder load_decoder(const std::filesystem::path& path);

// The options that rebuild a decoder from its config() (weights aside).
Options decoder_options_from_config(const nlohmann::json& config);

}  // namespace memscript
