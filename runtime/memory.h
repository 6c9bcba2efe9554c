#pragma once

#include <cstdint>
#include <string>

namespace memscript {

// Keeps memory the process frees for its own next allocations instead of handing it back to
// the kernel. glibc maps every block above 32 MB (and, by default, many above 128 KB) straight
// from the kernel and unmaps it on free, so a training step, which allocates the same sizes
// step after step, would get fresh pages every time and pay for the kernel zeroing them (a large
// share of a long Mamba step). The cost: after a large
// evaluation the process keeps its peak resident size. Call once, before the first tensor.
void keep_freed_memory();

// The memory a script may use: --max-memory when given, else the machine's physical memory.
uint64_t memory_budget();

// --max-memory: caps what the script may allocate beyond what the process holds when this is
// called (RLIMIT_DATA, which counts the heap and private mappings, set to the data in use plus
// `bytes`), so an allocation past it fails as an out-of-memory error instead of the machine
// swapping; memory_budget() becomes `bytes`. Throws UserError when the limit cannot be set.
void limit_memory(uint64_t bytes);

// Throws UserError("<what> would need at least <bytes>, more than the <budget> ...") when
// `bytes` (a lower bound, as a double so that products of huge sizes do not overflow) exceeds
// memory_budget(). Called before allocating sizes a script chose.
void check_fits_in_memory(double bytes, const std::string& what);

// "1.5 GiB", "640 MiB", "12 KiB", "100 B".
std::string format_bytes(double bytes);

// "4G", "512M", "1T", "300000" (bytes) -> bytes; 0 when the text is not one of these.
uint64_t parse_bytes(const std::string& text);

}  // namespace memscript
