#pragma once

namespace memscript {

// Keeps memory the process frees for its own next allocations instead of handing it back to
// the kernel. glibc maps every block above 32 MB (and, by default, many above 128 KB) straight
// from the kernel and unmaps it on free, so a training step, which allocates the same sizes
// step after step, got fresh pages every time and paid for the kernel zeroing them: a third of
// a Mamba step at length 2048, and 13% of a seed-mini qLSTM step at 256. The cost: after a large
// evaluation the process keeps its peak resident size. Call once, before the first tensor.
void keep_freed_memory();

}  // namespace memscript
