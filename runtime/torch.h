#pragma once

// The one libtorch include of the runtime; also the precompiled header of every target that
// uses libtorch, so that the big headers are parsed once per build.
#include <torch/torch.h>
