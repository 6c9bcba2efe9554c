// The cache of freed tensor blocks (runtime/tensor_cache.h): reuse by rounded size, alignment,
// its two limits, many threads, and tensors computed through it once it is libtorch's allocator.

#include <catch2/catch.hpp>

#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/tensor_cache.h"
#include "runtime/torch.h"

using memscript::TensorCache;
using memscript::TensorCacheLimits;

TEST_CASE("tensor cache: a freed block serves the next allocation of its rounded size") {
  TensorCache cache;
  c10::DataPtr first = cache.allocate(1000);
  void* const address = first.get();
  first.clear();  // freed into the cache
  CHECK(cache.counts().cached_bytes == 1024);
  c10::DataPtr same_rounded_size = cache.allocate(1000 - 30);
  CHECK(same_rounded_size.get() == address);
  c10::DataPtr larger = cache.allocate(2000);
  CHECK(larger.get() != address);
  const memscript::TensorCacheCounts counts = cache.counts();
  CHECK(counts.reused == 1);
  CHECK(counts.allocated == 2);
  CHECK(counts.cached_bytes == 0);
}

TEST_CASE("tensor cache: data is aligned and writable to its last byte, and zero bytes is null") {
  TensorCache cache;
  for (size_t bytes : {1, 63, 64, 65, 4096, 100000}) {
    c10::DataPtr block = cache.allocate(bytes);
    CHECK(reinterpret_cast<uintptr_t>(block.get()) % TensorCache::kAlignment == 0);
    std::memset(block.get(), 0xab, bytes);
  }
  CHECK(cache.allocate(0).get() == nullptr);
  // oneDNN's tensors allocate raw and free through raw_deleter, zero bytes (null) included.
  const size_t cached_before = cache.counts().cached_bytes;
  void* raw = cache.raw_allocate(100);
  CHECK(raw != nullptr);
  cache.raw_deleter()(raw);
  cache.raw_deleter()(cache.raw_allocate(0));
  CHECK(cache.counts().cached_bytes == cached_before);  // the 128-byte block back
}

TEST_CASE("tensor cache: blocks above the largest cached size, or over the total, go to malloc") {
  TensorCache cache(TensorCacheLimits{.largest_block = 4096, .total = 8192});
  cache.allocate(4096 + 64).clear();
  CHECK(cache.counts().cached_bytes == 0);
  {
    std::vector<c10::DataPtr> blocks;
    for (int i = 0; i < 3; ++i) blocks.push_back(cache.allocate(4096));
  }  // three freed, two kept
  CHECK(cache.counts().cached_bytes == 8192);
  for (int i = 0; i < 3; ++i) cache.allocate(4096);
  CHECK(cache.counts().reused == 3);  // each freed straight back, then served again
}

TEST_CASE("tensor cache: two threads allocating and freeing share it safely") {
  TensorCache cache(TensorCacheLimits{.largest_block = 1 << 16, .total = 64 << 20});
  constexpr int kRounds = 20000;
  const auto churn = [&cache](int seed) {
    std::vector<c10::DataPtr> held(8);
    for (int i = 0; i < kRounds; ++i) {
      const size_t bytes = static_cast<size_t>(64 * (1 + (i * 7 + seed) % 300));
      c10::DataPtr& slot = held[static_cast<size_t>(i % 8)];
      slot = cache.allocate(bytes);
      std::memset(slot.get(), seed, bytes);
    }
  };
  std::thread other(churn, 1);
  churn(2);
  other.join();
  const memscript::TensorCacheCounts counts = cache.counts();
  CHECK(counts.reused + counts.allocated == 2 * kRounds);
  CHECK(counts.reused > kRounds);  // 300 sizes, each thread holds 8 blocks: most are reused
  CHECK(counts.cached_bytes <= size_t{64} << 20);
}

TEST_CASE("tensor cache: installed as libtorch's CPU allocator, tensors compute as before") {
  memscript::cache_tensor_memory();
#ifndef __SANITIZE_ADDRESS__
  CHECK(c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator());
#endif
  torch::manual_seed(3);
  const torch::Tensor a = torch::randn({37, 19}), b = torch::randn({19, 23});
  for (int step = 0; step < 3; ++step) {  // the later steps reuse the first one's blocks
    const torch::Tensor product = torch::matmul(a, b).relu().sum(0);
    const torch::Tensor expected =
        torch::matmul(a.to(torch::kDouble), b.to(torch::kDouble)).relu().sum(0);
    CHECK(torch::allclose(product.to(torch::kDouble), expected, 1e-5, 1e-5));
  }
  // A depthwise convolution (Mamba's) goes through oneDNN, which allocates raw blocks.
  const torch::Tensor x = torch::randn({2, 8, 16}), w = torch::randn({8, 1, 4});
  const torch::Tensor y = torch::conv1d(x, w, {}, 1, 3, 1, 8);
  const torch::Tensor y_double =
      torch::conv1d(x.to(torch::kDouble), w.to(torch::kDouble), {}, 1, 3, 1, 8);
  CHECK(torch::allclose(y.to(torch::kDouble), y_double, 1e-5, 1e-5));
}
