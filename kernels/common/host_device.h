#pragma once

// Marks code that is compiled for both the CPU and, under nvcc, the GPU: each recurrence's
// step body is written once and shared by the CPU loop and the CUDA kernel.
#ifdef __CUDACC__
#define MS_HOST_DEVICE __host__ __device__
#else
#define MS_HOST_DEVICE
#endif

// A step body the loops must inline: called once per row inside their innermost loops, where a
// call would spill the running sums it accumulates by reference.
#ifdef __CUDACC__
#define MS_INLINE __forceinline__
#else
#define MS_INLINE __attribute__((always_inline)) inline
#endif
