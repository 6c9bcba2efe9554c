#pragma once

// Software prefetch for kernels that step kTileRows lanes through time together, each lane
// reading (or writing) a few numbers of its own row per step.
//
// At long lengths those rows no longer stay in the caches between the passes over them, and a
// group's lanes read from more places per step (4 batch elements × a dozen arrays) than the
// hardware prefetcher follows; the backward also walks its segments out of order. Every step
// then waits on memory. Asking for a step's lines a few steps ahead hides that wait. One
// prefetch per lane and array costs more than it saves at lengths that fit in the caches, so a
// plan first
// works out which cache lines a step's rows touch: lanes of one batch element usually share a
// line (heads side by side), and each line is asked for once.
//
// CPU only (nvcc never sees it).

#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/common/lanes.h"

namespace memscript::kernels {

// Shortest sequence the kernels prefetch for. Below it a training step's arrays stay in the L2
// and L3 caches between the passes over them, and asking for lines again only costs time
// (`make bench` times both sides of the threshold).
constexpr int64_t kPrefetchMinLength = 512;

class LanePrefetch {
 public:
  LanePrefetch() = default;

  // rows[l]: lane l's row at some step, row_bytes long; consecutive steps lie time_stride_bytes
  // apart, the same for every lane.
  LanePrefetch(const void* const* rows, int64_t row_bytes, int64_t time_stride_bytes) {
    const char* first = static_cast<const char*>(rows[0]);
    std::array<Span, kTileRows> spans;
    for (int64_t l = 0; l < kTileRows; ++l) {
      const int64_t start = static_cast<const char*>(rows[l]) - first;
      spans[l] = {start, start + row_bytes};
    }
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.start < b.start; });
    // Where every step's lines start at the same offsets as this step's, ask for exactly the
    // lines this step touches; otherwise for points at most a line apart over every span,
    // which reach every line it may touch.
    const bool same_lines_every_step = time_stride_bytes % kLineBytes == 0;
    const int64_t first_line_start =
        static_cast<int64_t>(reinterpret_cast<uintptr_t>(first) % kLineBytes);
    Span merged = spans[0];
    for (int64_t l = 1; l <= kTileRows; ++l) {
      if (l < kTileRows && spans[l].start <= merged.end) {
        merged.end = std::max(merged.end, spans[l].end);
        continue;
      }
      if (same_lines_every_step) {
        add_lines(merged, first_line_start);
      } else {
        add_points(merged);
      }
      if (l < kTileRows) merged = spans[l];
    }
  }

  // Asks for the lines of the step whose lane 0 row starts at `first`.
  template <bool Write>
  [[gnu::always_inline]] void fetch(const void* first) const {
    const char* base = static_cast<const char*>(first);
    for (int64_t i = 0; i < count_; ++i) __builtin_prefetch(base + offsets_[i], Write ? 1 : 0);
  }

  // The lines asked for: count() of them, the i-th at offset(i) bytes from lane 0's row.
  int64_t count() const { return count_; }
  int64_t offset(int64_t i) const { return offsets_[static_cast<size_t>(i)]; }

 private:
  static constexpr int64_t kLineBytes = 64;
  // Enough for kTileRows lanes of rows up to 64 floats: the widest the lane kernels step.
  static constexpr int64_t kMaxOffsets = 6 * kTileRows;

  struct Span {
    int64_t start, end;  // bytes from lane 0's row
  };

  void add(int64_t offset) {
    if (count_ > 0 && offsets_[count_ - 1] == offset) return;
    if (count_ < kMaxOffsets) offsets_[count_++] = offset;
  }
  // Each line of the span, by where it starts relative to lane 0's row.
  void add_lines(const Span& span, int64_t first_line_start) {
    const int64_t from = floor_to_line(span.start + first_line_start);
    for (int64_t line = from; line < span.end + first_line_start; line += kLineBytes)
      add(line - first_line_start);
  }
  void add_points(const Span& span) {
    for (int64_t at = span.start; at < span.end; at += kLineBytes) add(at);
    add(span.end - 1);
  }
  static int64_t floor_to_line(int64_t bytes) {
    const int64_t r = bytes % kLineBytes;
    return r < 0 ? bytes - r - kLineBytes : bytes - r;
  }

  std::array<int64_t, kMaxOffsets> offsets_{};
  int64_t count_ = 0;
};

}  // namespace memscript::kernels
