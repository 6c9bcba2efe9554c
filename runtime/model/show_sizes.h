#pragma once

// A tensor's shape and dtype as error messages print it: "[4, 16] Float".

#include <string>

#include "runtime/torch.h"

namespace memscript {

inline std::string show_sizes(const torch::Tensor& tensor) {
  if (!tensor.defined()) return "no tensor";
  std::string text = "[";
  for (int64_t d = 0; d < tensor.dim(); ++d)
    text += (d ? ", " : "") + std::to_string(tensor.size(d));
  return text + "] " + c10::toString(tensor.scalar_type());
}

}  // namespace memscript
