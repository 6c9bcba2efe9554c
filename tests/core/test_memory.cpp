#include <catch2/catch.hpp>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "runtime/memory.h"

TEST_CASE("after keep_freed_memory a large block comes from the heap and stays there when freed") {
  memscript::keep_freed_memory();
  constexpr size_t kBytes = size_t{64} << 20;  // above glibc's largest mmap threshold (32 MB)
  const struct mallinfo2 before = mallinfo2();
  void* block = std::malloc(kBytes);
  REQUIRE(block != nullptr);
  std::memset(block, 1, kBytes);
  const struct mallinfo2 held = mallinfo2();
  CHECK(held.hblkhd == before.hblkhd);               // not a mapping of its own
  CHECK(held.uordblks >= before.uordblks + kBytes);  // in use, on the heap
  std::free(block);
  CHECK(mallinfo2().arena == held.arena);  // the heap kept it for the next allocation
}
