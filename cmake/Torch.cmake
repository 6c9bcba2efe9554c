# libtorch: from the Python given in MEMSCRIPT_TORCH_PYTHON (what scripts/bootstrap.sh installs),
# or from any libtorch the usual way (-DTorch_DIR=... or CMAKE_PREFIX_PATH).
if(MEMSCRIPT_TORCH_PYTHON AND NOT Torch_DIR)
  execute_process(
    COMMAND ${MEMSCRIPT_TORCH_PYTHON} -W ignore -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _torch_prefix
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _torch_status)
  if(NOT _torch_status EQUAL 0)
    message(FATAL_ERROR "memscript: ${MEMSCRIPT_TORCH_PYTHON} cannot import torch; run scripts/bootstrap.sh")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
endif()

# A CUDA build of libtorch appends its own -gencode list (down to sm_50, which nvcc 13 no
# longer knows) to CMAKE_CUDA_FLAGS and sets CMAKE_CUDA_ARCHITECTURES to OFF; our kernels
# choose architectures through CMAKE_CUDA_ARCHITECTURES, so both are put back.
set(_cuda_flags_before_torch "${CMAKE_CUDA_FLAGS}")
set(_cuda_archs_before_torch "${CMAKE_CUDA_ARCHITECTURES}")
find_package(Torch REQUIRED)
set(CMAKE_CUDA_FLAGS "${_cuda_flags_before_torch}")
if(_cuda_archs_before_torch)
  set(CMAKE_CUDA_ARCHITECTURES "${_cuda_archs_before_torch}")
else()
  unset(CMAKE_CUDA_ARCHITECTURES)
endif()
message(STATUS "memscript: libtorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

# A torch wheel keeps its CUDA libraries in sibling nvidia/*/lib folders that its own RPATH
# names. The linker searches -rpath folders (such as the CUDA toolkit's) before a library's
# RPATH, so without these it resolves libtorch_cuda's needs against the toolkit's older copies.
file(GLOB MEMSCRIPT_TORCH_NVIDIA_LIBS LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
add_library(memscript_torch INTERFACE)
target_link_libraries(memscript_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(memscript_torch INTERFACE ${TORCH_CXX_FLAGS})
foreach(dir IN LISTS MEMSCRIPT_TORCH_NVIDIA_LIBS)
  target_link_options(memscript_torch INTERFACE "LINKER:-rpath-link,${dir}")
endforeach()
