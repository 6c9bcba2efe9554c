#pragma once

// What the task tests share: building a task from options, and one row of a batch.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/task.h"

namespace memscript::test {

inline std::shared_ptr<Task> build_task(const std::string& name,
                                        const std::function<void(Options&)>& configure) {
  Options options("ms.task." + name);
  if (configure) configure(options);
  return make_task(name, options);
}

inline std::vector<int64_t> row(const std::vector<int64_t>& flat, int64_t index, int64_t length) {
  return {flat.begin() + index * length, flat.begin() + (index + 1) * length};
}

}  // namespace memscript::test
