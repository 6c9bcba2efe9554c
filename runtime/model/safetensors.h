#pragma once

// Tensors in the safetensors format, the one Python users load (safetensors.torch.load_file,
// or by hand: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the raw bytes). A memscript model saved this way loads into a
// PyTorch module whose parameter names match with load_state_dict.

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/torch.h"

namespace memscript {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes the tensors (moved to the CPU, made contiguous; float32, float64, int64 or bool) and
// string metadata atomically. Throws UserError for other dtypes or duplicate names.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  NamedTensors tensors;  // in the order of their bytes in the file
  std::map<std::string, std::string> metadata;
};

// Reads a file written by save_safetensors (or by the Python library, for those dtypes);
// throws UserError naming the file and what is wrong with it.
SafetensorsFile load_safetensors(const std::filesystem::path& path);

}  // namespace memscript
