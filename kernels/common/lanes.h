#pragma once

// The vector type of the CPU kernels: kTileRows numbers side by side in one value (GCC's vector
// extension, one or more registers wide), on which +, −, ·, / and comparisons work lane by lane.
// A lane does exactly what the same expression on one number does. CPU only (nvcc never sees
// it); row_tile.h builds the tiles of rows on it.

#include <cstdint>

namespace memscript::kernels {

constexpr int64_t kTileRows = 16;

// may_alias: a tile's columns are also read as one flat array of numbers.
template <typename T>
struct LanesOf {
  typedef T type __attribute__((vector_size(kTileRows * sizeof(T)), __may_alias__));
};
template <typename T>
using Lanes = typename LanesOf<T>::type;

}  // namespace memscript::kernels
