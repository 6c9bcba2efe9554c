#pragma once

// A small, fast, fully specified random generator (SplitMix64 to seed, xoshiro256** to draw).
// Tasks draw every sequence from its own generator seeded by (seed, stream, index), so a batch
// is the same whatever the thread count and whichever libtorch version is linked.

#include <cstdint>

namespace memscript {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Mixes several words into one seed; different argument lists give unrelated streams.
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  uint64_t state = a;
  uint64_t h = splitmix64(state);
  state ^= b + h;
  h = splitmix64(state);
  state ^= c + h;
  h = splitmix64(state);
  state ^= d + h;
  return splitmix64(state);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : s_) word = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, bound), without modulo bias (Lemire's method). bound must be > 0.
  uint64_t below(uint64_t bound) {
    __uint128_t product = static_cast<__uint128_t>(next()) * bound;
    uint64_t low = static_cast<uint64_t>(product);
    if (low < bound) {
      const uint64_t threshold = -bound % bound;
      while (low < threshold) {
        product = static_cast<__uint128_t>(next()) * bound;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

  // Uniform in [lo, hi], both inclusive.
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  bool bernoulli(double p) { return uniform() < p; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace memscript
