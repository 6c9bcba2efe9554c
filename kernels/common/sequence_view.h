#pragma once

// How the matrix-state kernels address a [batch, heads, length, width] tensor (or a
// [batch, heads, length] one, width 1) without copying it into one layout: element strides for
// batch, head and time, the width being contiguous. The runtime passes a head-split view of a
// projection ([batch, length, heads * width] seen as [batch, heads, length, width]) as it is.

#include <cstdint>

#include "kernels/common/host_device.h"

namespace memscript::kernels {

template <typename T>
struct SequenceView {
  T* data = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t time_stride = 0;

  MS_HOST_DEVICE T* at(int64_t batch, int64_t head, int64_t t) const {
    return data + batch * batch_stride + head * head_stride + t * time_stride;
  }
  MS_HOST_DEVICE explicit operator bool() const { return data != nullptr; }
};

}  // namespace memscript::kernels
