#pragma once

// `memscript --shard I/N`: this process runs only the runs whose shard is I (0 <= I < N).
// ms.sweep deals the runs of a script out in turn (the k-th run, counted over every sweep of
// the script in its fixed order, goes to shard k mod N), so shards are disjoint, cover every
// run, and differ in size by one at most; the same script and --set values give the same
// partition on every machine.

#include <string>

namespace memscript {

struct Shard {
  int index = 0;
  int count = 1;
};

// Parses "I/N"; throws UserError naming the text unless 0 <= I < N.
Shard parse_shard(const std::string& text);

// The shard of the k-th run (k counted from 0).
inline int shard_of_run(long long k, int count) { return static_cast<int>(k % count); }

}  // namespace memscript
