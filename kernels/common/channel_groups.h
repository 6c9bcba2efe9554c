#pragma once

// Channel groups: how the CPU loops of the diagonal scans (gated_scan.h, complex_scan.h) step
// many channels at once. At the study's sizes a batch row has 4 channels, and a recurrence over
// 4 numbers per step is one dependent multiply-add after another; the channels of several batch
// rows side by side make each step a few whole vector operations instead.
//
// A group is batch rows [first, first + rows); lane g · channels + c is channel c of row
// first + g. A scan runs its sequence in chunks of kChunk steps: the chunk's inputs are gathered
// from [batch, length, width] arrays into [step][lane] arrays, computed on there, and the
// results scattered back. Each lane evaluates exactly what the CUDA body evaluates for its
// channel, in the same order, so the grouping never changes a bit. CPU only.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/common/lane_prefetch.h"

namespace memscript::kernels {

// Steps per chunk: a chunk's arrays stay in the L1 cache between the passes over it.
constexpr int64_t kChunk = 32;
// Lanes a group aims for: whole rows of channels, at least this many.
constexpr int64_t kGroupLanes = 32;

struct ChannelGroup {
  int64_t first;
  int64_t rows;
  int64_t channels;

  int64_t lanes() const { return rows * channels; }
};

// Calls body(group) for groups of batch rows [begin, end) of about kGroupLanes lanes each.
template <typename F>
void for_channel_groups(int64_t channels, int64_t begin, int64_t end, F&& body) {
  const int64_t rows = std::max<int64_t>(1, kGroupLanes / channels);
  for (int64_t n = begin; n < end; n += rows)
    body(ChannelGroup{n, std::min(rows, end - n), channels});
}

// Calls body(t0, steps) for the chunks of a sequence, first to last or last to first, in
// chunks of Chunk steps (the scans' kChunk unless a kernel says otherwise).
template <int64_t Chunk = kChunk, typename F>
void for_chunks(int64_t length, F&& body) {
  for (int64_t t0 = 0; t0 < length; t0 += Chunk) body(t0, std::min(Chunk, length - t0));
}
template <int64_t Chunk = kChunk, typename F>
void for_chunks_in_reverse(int64_t length, F&& body) {
  if (length == 0) return;
  for (int64_t t0 = (length - 1) / Chunk * Chunk; t0 >= 0; t0 -= Chunk)
    body(t0, std::min(Chunk, length - t0));
}

// Calls body.template operator()<N>() with N the number of channels when it is one of the
// common small counts (1, 2, 4, 8, 16), else with N = 0: copies of a row's channels then have a
// length known at compile time (a library memmove call for 4 numbers cost more than the scan's
// arithmetic).
template <typename Body>
void with_channel_count(int64_t channels, Body&& body) {
  switch (channels) {
    case 1:
      return body.template operator()<1>();
    case 2:
      return body.template operator()<2>();
    case 4:
      return body.template operator()<4>();
    case 8:
      return body.template operator()<8>();
    case 16:
      return body.template operator()<16>();
    default:
      return body.template operator()<0>();
  }
}

// Where a chunk's gather or scatter asks the cache for rows one chunk ahead: at long lengths
// the arrays no longer stay in the caches between the forward and the backward, a chunk's rows
// are runs of a few lines, too short for the hardware prefetcher to pick up, and the backward
// takes its chunks last to first. Asking for step t + ahead while moving step t (ahead = ±kChunk,
// the chunk the walk takes next) spreads the requests over the chunk's work. Steps outside the
// sequence are not asked for.
struct ChunkAhead {
  int64_t length;
  int64_t ahead;  // steps from a chunk to the next in the walk's order; 0: ask for nothing

  template <bool Write, typename T>
  [[gnu::always_inline]] void fetch(const T* step_row, int64_t step, int64_t width) const {
    const int64_t at = step + ahead;
    if (ahead != 0 && at >= 0 && at < length) __builtin_prefetch(step_row + ahead * width, Write);
  }
};

// The `ahead` of a chunk walk over `length` steps, first to last or last to first: none below
// kPrefetchMinLength.
inline int64_t chunk_ahead(int64_t length, bool reverse) {
  if (length < kPrefetchMinLength) return 0;
  return reverse ? -kChunk : kChunk;
}

// Steps [t0, t0 + steps) of a [batch, length, Slots · channels] array into lanes, slice s (the
// numbers at s · channels of each step's row; the gates of a step side by side) into out[s]:
// out[s][t · lanes + g · channels + c]. Each step's row is read once. (This and the copies
// below loop to `count`, a local copy of `steps`: the lambda sees `steps` through a reference
// the row copies might alias, and would reload it every step.)
template <int64_t Slots, typename T>
void gather_chunk_slots(const T* source, int64_t length, const ChannelGroup& group, int64_t t0,
                        int64_t steps, T* const (&out)[Slots], int64_t ahead) {
  const ChunkAhead next{length, ahead};
  with_channel_count(group.channels, [&]<int64_t N>() {
    const int64_t channels = N > 0 ? N : group.channels, lanes = group.lanes();
    const int64_t width = Slots * channels, count = steps;
    for (int64_t g = 0; g < group.rows; ++g) {
      const T* __restrict row = source + ((group.first + g) * length + t0) * width;
      for (int64_t t = 0; t < count; ++t) {
        next.fetch<false>(row + t * width, t0 + t, width);
        for (int64_t s = 0; s < Slots; ++s) {
          const T* from = row + t * width + s * channels;
          std::copy(from, from + channels, out[s] + t * lanes + g * channels);
        }
      }
    }
  });
}

// The inverse of gather_chunk_slots.
template <int64_t Slots, typename T>
void scatter_chunk_slots(const T* const (&in)[Slots], int64_t length, const ChannelGroup& group,
                         int64_t t0, int64_t steps, T* target, int64_t ahead) {
  const ChunkAhead next{length, ahead};
  with_channel_count(group.channels, [&]<int64_t N>() {
    const int64_t channels = N > 0 ? N : group.channels, lanes = group.lanes();
    const int64_t width = Slots * channels, count = steps;
    for (int64_t g = 0; g < group.rows; ++g) {
      T* __restrict row = target + ((group.first + g) * length + t0) * width;
      for (int64_t t = 0; t < count; ++t) {
        next.fetch<true>(row + t * width, t0 + t, width);
        for (int64_t s = 0; s < Slots; ++s) {
          const T* from = in[s] + t * lanes + g * channels;
          std::copy(from, from + channels, row + t * width + s * channels);
        }
      }
    }
  });
}

// The one-slice copies: a [batch, length, channels] array (states, outputs, their gradients).
template <typename T>
void gather_chunk(const T* source, int64_t length, const ChannelGroup& group, int64_t t0,
                  int64_t steps, T* out, int64_t ahead) {
  gather_chunk_slots<1>(source, length, group, t0, steps, {out}, ahead);
}
template <typename T>
void scatter_chunk(const T* lanes_in, int64_t length, const ChannelGroup& group, int64_t t0,
                   int64_t steps, T* target, int64_t ahead) {
  scatter_chunk_slots<1>({lanes_in}, length, group, t0, steps, target, ahead);
}

// The group's lanes of a [batch, channels] array (an initial state, a final state's
// gradient), or zeros when it is null; and back (nothing when the target is null).
template <typename T>
std::vector<T> group_values(const T* per_row, const ChannelGroup& group) {
  std::vector<T> values(static_cast<size_t>(group.lanes()), T(0));
  if (per_row) {
    const T* from = per_row + group.first * group.channels;
    std::copy(from, from + group.lanes(), values.begin());
  }
  return values;
}
template <typename T>
void store_group_values(const std::vector<T>& values, const ChannelGroup& group, T* per_row) {
  if (per_row) std::copy(values.begin(), values.end(), per_row + group.first * group.channels);
}

// Each lane's entry of a per-channel array (a bias, an eigenvalue), or zeros when it is null.
template <typename T>
std::vector<T> per_lane(const T* per_channel, const ChannelGroup& group) {
  std::vector<T> values(static_cast<size_t>(group.lanes()), T(0));
  if (per_channel) {
    for (int64_t l = 0; l < group.lanes(); ++l) values[l] = per_channel[l % group.channels];
  }
  return values;
}

// The states before each of a chunk's steps, from `states` (the chunk's, with the step before
// t0 at states − lanes when t0 > 0): the previous step's, or the initial state at t0 = 0.
template <typename T>
void previous_states(const T* states, const std::vector<T>& initial, int64_t t0, int64_t steps,
                     int64_t lanes, T* previous) {
  if (t0 > 0) {
    std::copy(states - lanes, states + (steps - 1) * lanes, previous);
  } else {
    std::copy(initial.begin(), initial.end(), previous);
    std::copy(states, states + (steps - 1) * lanes, previous + lanes);
  }
}

// Scratch for one chunk: `arrays` arrays of [kChunk][lanes].
template <typename T>
struct ChunkArrays {
  std::vector<T> storage;
  int64_t lanes;

  ChunkArrays(int arrays, int64_t lanes_)
      : storage(static_cast<size_t>(arrays * kChunk * lanes_)), lanes(lanes_) {}
  T* operator[](int index) { return storage.data() + index * kChunk * lanes; }
};

// A chunk's states with the one before its first step: states()[−lanes …) is step t0 − 1.
template <typename T>
struct ChunkStates {
  std::vector<T> storage;
  int64_t lanes;

  explicit ChunkStates(int64_t lanes_)
      : storage(static_cast<size_t>((kChunk + 1) * lanes_)), lanes(lanes_) {}
  T* states() { return storage.data() + lanes; }

  // Steps [t0 − 1, t0 + steps) of a [batch, length, channels] array of states (only
  // [t0, t0 + steps) at t0 = 0).
  void gather(const T* source, int64_t length, const ChannelGroup& group, int64_t t0, int64_t steps,
              int64_t ahead) {
    if (t0 > 0) {
      gather_chunk(source, length, group, t0 - 1, steps + 1, storage.data(), ahead);
    } else {
      gather_chunk(source, length, group, t0, steps, states(), ahead);
    }
  }
};

}  // namespace memscript::kernels
