#pragma once

// libtorch's CPU tensors through a cache of freed blocks.
//
// A training step allocates the same tensor sizes step after step, most of them small: at
// seed-mini, a few hundred tensors of a few kilobytes per step. Through glibc every one of
// them cost a malloc and a free, and the frees of large blocks between small ones make glibc
// consolidate its bins: a visible share of a small model's step. The cache keeps a
// freed block, by its size rounded up to the alignment, for the next tensor of that size.
//
// Blocks above `largest_block` go to malloc as before (their cost is small against the work on
// them), and the cache holds at most `total` bytes of freed blocks; a block that would go over
// is given back to malloc. The cost is memory: cached blocks also pin the heap around them, so
// the limits are kept small (a long evaluation's peak grows with them, bench_memory measures
// it). Thread-safe (one mutex: the intra-op pool's threads free tensors too).

#include <c10/core/Allocator.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace memscript {

struct TensorCacheLimits {
  size_t largest_block = size_t{1} << 20;
  size_t total = size_t{64} << 20;
};

struct TensorCacheCounts {
  size_t reused = 0;        // allocations served from the cache
  size_t allocated = 0;     // allocations that went to malloc
  size_t cached_bytes = 0;  // freed bytes held now
};

class TensorCache final : public c10::Allocator {
 public:
  // Data is aligned as libtorch's own CPU allocator aligns it.
  static constexpr size_t kAlignment = 64;

  explicit TensorCache(TensorCacheLimits limits = {});
  ~TensorCache() override;  // gives the cached blocks back; blocks in use must be freed before

  c10::DataPtr allocate(size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, size_t count) const override;

  TensorCacheCounts counts() const;

 private:
  static void free_block(void* data);
  void release(void* block, size_t bytes);

  TensorCacheLimits limits_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // by rounded size
  TensorCacheCounts counts_;
};

// Makes a process-wide TensorCache libtorch's CPU allocator: call once, before the first
// tensor (tensors made before keep the allocator that made them). Not under AddressSanitizer,
// which must see each tensor's own malloc and free to find reads after a free.
void cache_tensor_memory();

}  // namespace memscript
