#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <vector>

#include "kernels/common/lane_prefetch.h"

using memscript::kernels::kTileRows;
using memscript::kernels::LanePrefetch;

namespace {

constexpr uintptr_t kLine = 64;

// A [batch, length, heads, width] array of floats (or [batch, heads, length, width] when
// heads_outer), starting `skew` floats into a line-aligned buffer, as the lane kernels see it:
// lane l is head l % heads of batch element l / heads.
struct Layout {
  int64_t batch, heads, length, width;
  bool heads_outer;
  int64_t skew;

  int64_t time_stride() const { return heads_outer ? width : heads * width; }
  int64_t head_stride() const { return heads_outer ? length * width : width; }
  int64_t batch_stride() const { return heads * length * width; }
};

struct Rows {
  std::vector<float> storage;
  const float* base;
  Layout layout;

  explicit Rows(const Layout& l)
      : storage(static_cast<size_t>(l.batch * l.batch_stride() + l.skew + 64)), layout(l) {
    const auto address = reinterpret_cast<uintptr_t>(storage.data());
    const uintptr_t aligned = (address + kLine - 1) / kLine * kLine;
    base = storage.data() + (aligned - address) / sizeof(float) + l.skew;
  }
  const float* row(int64_t lane, int64_t t) const {
    const int64_t b = lane / layout.heads, h = lane % layout.heads;
    return base + b * layout.batch_stride() + h * layout.head_stride() + t * layout.time_stride();
  }
};

std::set<uintptr_t> touched_lines(const Rows& rows, int64_t t) {
  std::set<uintptr_t> lines;
  for (int64_t l = 0; l < kTileRows; ++l) {
    const auto start = reinterpret_cast<uintptr_t>(rows.row(l, t));
    const uintptr_t end = start + rows.layout.width * sizeof(float);
    for (uintptr_t line = start / kLine; line * kLine < end; ++line) lines.insert(line);
  }
  return lines;
}

std::set<uintptr_t> asked_lines(const LanePrefetch& plan, const Rows& rows, int64_t t) {
  std::set<uintptr_t> lines;
  const auto first = reinterpret_cast<intptr_t>(rows.row(0, t));
  for (int64_t i = 0; i < plan.count(); ++i)
    lines.insert(static_cast<uintptr_t>(first + plan.offset(i)) / kLine);
  return lines;
}

LanePrefetch plan_for(const Rows& rows) {
  const void* lanes[kTileRows];
  for (int64_t l = 0; l < kTileRows; ++l) lanes[l] = rows.row(l, 0);
  return LanePrefetch(lanes, rows.layout.width * int64_t(sizeof(float)),
                      rows.layout.time_stride() * int64_t(sizeof(float)));
}

}  // namespace

TEST_CASE("a lane prefetch plan asks for every line the lanes' rows touch at every step") {
  const Layout layouts[] = {
      {4, 4, 50, 4, false, 0},    // heads side by side, one line per batch element and step
      {4, 4, 50, 4, false, 3},    // the same, not aligned to a line
      {4, 4, 50, 1, false, 0},    // a width-1 array (β, α): steps 16 bytes apart
      {4, 4, 50, 1, false, 5},    //
      {4, 4, 50, 4, true, 1},     // heads apart: each head its own stream
      {4, 4, 50, 3, false, 2},    // steps 48 bytes apart: lines shift from step to step
      {16, 1, 40, 16, false, 7},  // one head per batch element, rows of a whole line
      {2, 8, 30, 8, true, 0},     //
  };
  for (const Layout& layout : layouts) {
    INFO("batch " << layout.batch << " heads " << layout.heads << " width " << layout.width
                  << (layout.heads_outer ? " heads outer" : "") << " skew " << layout.skew);
    const Rows rows(layout);
    const LanePrefetch plan = plan_for(rows);
    for (int64_t t = 0; t < layout.length; ++t) {
      INFO("step " << t);
      const std::set<uintptr_t> asked = asked_lines(plan, rows, t);
      for (const uintptr_t line : touched_lines(rows, t)) CHECK(asked.count(line) == 1);
    }
  }
}

TEST_CASE("a lane prefetch plan asks for each line once where the lines repeat every step") {
  // Four batch elements of four heads of four floats: a line per batch element and step.
  const Rows aligned(Layout{4, 4, 50, 4, false, 0});
  CHECK(plan_for(aligned).count() == 4);
  // The same rows off a line boundary touch two lines per batch element.
  const Rows skewed(Layout{4, 4, 50, 4, false, 3});
  CHECK(plan_for(skewed).count() == 8);
  // β of the same heads: 16 bytes per batch element, in one line or two.
  const Rows narrow(Layout{4, 4, 50, 1, false, 0});
  CHECK(plan_for(narrow).count() <= 8);
}
