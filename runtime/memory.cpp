#include "runtime/memory.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/options.h"

namespace memscript {

void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);              // every block from the heap, none mapped on its own
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // and the heap's top never given back
}

namespace {

uint64_t limit_bytes = 0;  // --max-memory, 0 when not given

uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return UINT64_MAX;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

}  // namespace

uint64_t memory_budget() {
  const uint64_t machine = physical_memory();
  return limit_bytes > 0 && limit_bytes < machine ? limit_bytes : machine;
}

// The process's data as the kernel counts it against RLIMIT_DATA (VmData), 0 when unknown.
uint64_t data_in_use() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, status)) {
    if (std::sscanf(line, "VmData: %llu kB", &kib) == 1) break;
  }
  std::fclose(status);
  return static_cast<uint64_t>(kib) * 1024;
}

void limit_memory(uint64_t bytes) {
  // On top of what the process holds already: libtorch reserves hundreds of MB of address
  // space at start-up, most of it never touched.
  uint64_t total = data_in_use() + bytes;
  rlimit existing{};
  if (::getrlimit(RLIMIT_DATA, &existing) == 0 && existing.rlim_max != RLIM_INFINITY &&
      total > existing.rlim_max)
    total = existing.rlim_max;  // only root may raise a hard limit
  const rlimit limit{static_cast<rlim_t>(total), static_cast<rlim_t>(total)};
  if (::setrlimit(RLIMIT_DATA, &limit) != 0) {
    throw UserError("--max-memory " + format_bytes(static_cast<double>(bytes)) +
                    ": cannot set the limit: " + std::strerror(errno));
  }
  limit_bytes = bytes;
}

void check_fits_in_memory(double bytes, const std::string& what) {
  const double budget = static_cast<double>(memory_budget());
  if (!(bytes > budget)) return;
  throw UserError(what + " would need at least " + format_bytes(bytes) + ", more than the " +
                  format_bytes(budget) +
                  (limit_bytes > 0 ? " that --max-memory allows" : " of memory this machine has"));
}

std::string format_bytes(double bytes) {
  const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(units)) {
    bytes /= 1024;
    ++unit;
  }
  char text[64];
  if (!std::isfinite(bytes)) return "an unbounded amount";
  std::snprintf(text, sizeof text, unit == 0 || bytes >= 100 ? "%.0f %s" : "%.1f %s", bytes,
                units[unit]);
  return text;
}

uint64_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(text.c_str(), &end);
  if (text.empty() || errno || end == text.c_str() || !(number > 0)) return 0;
  const std::string unit = end;
  double scale = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") {
    scale = 1024.0;
  } else if (unit == "M" || unit == "MiB") {
    scale = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GiB") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "T" || unit == "TiB") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else if (!unit.empty()) {
    return 0;
  }
  const double bytes = number * scale;
  if (!(bytes >= 1) || bytes > 1.8e19) return 0;
  return static_cast<uint64_t>(bytes);
}

}  // namespace memscript
