#include "runtime/memory.h"

#include <malloc.h>

#include <climits>

namespace memscript {

void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);              // every block from the heap, none mapped on its own
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // and the heap's top never given back
}

}  // namespace memscript
