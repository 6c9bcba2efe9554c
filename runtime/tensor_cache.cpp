#include "runtime/tensor_cache.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <new>

namespace memscript {

namespace {

// Every block starts with this header, one alignment unit long, so that the data after it is
// aligned and the deleter (which gets only the data pointer) finds its cache and size.
struct BlockHeader {
  TensorCache* owner;
  size_t bytes;  // of the data, rounded up to the alignment
};
static_assert(sizeof(BlockHeader) <= TensorCache::kAlignment);

size_t rounded_up(size_t bytes) {
  return (bytes + TensorCache::kAlignment - 1) / TensorCache::kAlignment * TensorCache::kAlignment;
}

void* data_of(void* block) { return static_cast<char*>(block) + TensorCache::kAlignment; }
BlockHeader* header_of(void* data) {
  return reinterpret_cast<BlockHeader*>(static_cast<char*>(data) - TensorCache::kAlignment);
}

}  // namespace

TensorCache::TensorCache(TensorCacheLimits limits) : limits_(limits) {}

TensorCache::~TensorCache() {
  for (auto& [bytes, blocks] : free_blocks_) {
    for (void* block : blocks) std::free(block);
  }
}

c10::DataPtr TensorCache::allocate(size_t bytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (bytes == 0) return {nullptr, nullptr, &free_block, cpu};
  const size_t rounded = rounded_up(bytes);
  void* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = free_blocks_.find(rounded);
    if (found != free_blocks_.end() && !found->second.empty()) {
      block = found->second.back();
      found->second.pop_back();
      counts_.cached_bytes -= rounded;
      ++counts_.reused;
    } else {
      ++counts_.allocated;
    }
  }
  if (block == nullptr) {
    block = std::aligned_alloc(kAlignment, kAlignment + rounded);
    if (block == nullptr) throw std::bad_alloc();
    *static_cast<BlockHeader*>(block) = {this, rounded};
  }
  void* data = data_of(block);
  return {data, data, &free_block, cpu};
}

c10::DeleterFnPtr TensorCache::raw_deleter() const { return &free_block; }

void TensorCache::copy_data(void* dest, const void* src, size_t count) const {
  default_copy_data(dest, src, count);
}

TensorCacheCounts TensorCache::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void TensorCache::free_block(void* data) {
  if (data == nullptr) return;  // raw_allocate(0)'s block, which oneDNN's tensors free too
  BlockHeader* header = header_of(data);
  header->owner->release(header, header->bytes);
}

void TensorCache::release(void* block, size_t bytes) {
  if (bytes <= limits_.largest_block) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (counts_.cached_bytes + bytes <= limits_.total) {
      free_blocks_[bytes].push_back(block);
      counts_.cached_bytes += bytes;
      return;
    }
  }
  std::free(block);
}

void cache_tensor_memory() {
#ifndef __SANITIZE_ADDRESS__
  // Never deleted: tensors may outlive main's locals and static destructors.
  static TensorCache* const cache = new TensorCache();
  c10::SetCPUAllocator(cache, /*priority=*/1);
#endif
}

}  // namespace memscript
