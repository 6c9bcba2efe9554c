#pragma once

// A tensor's shape and dtype as error messages print it: "[4, 16] Float".

#include <string>

#include "runtime/torch.h"

namespace memscript {

// Sizes a tensor should have, printed with the dtype of `like`.
inline std::string show_sizes(c10::IntArrayRef sizes, const torch::Tensor& like) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "] " + c10::toString(like.scalar_type());
}

inline std::string show_sizes(const torch::Tensor& tensor) {
  return tensor.defined() ? show_sizes(tensor.sizes(), tensor) : "no tensor";
}

}  // namespace memscript
