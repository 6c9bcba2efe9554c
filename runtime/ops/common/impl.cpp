#include "runtime/ops/common/impl.h"

namespace memscript {

Impl read_impl(Options& options) {
  return {options.string("impl", "fused", {"fused", "reference"}) == "fused"};
}

}  // namespace memscript
