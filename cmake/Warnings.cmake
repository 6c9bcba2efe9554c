# Warnings on for our own code (never for libtorch's headers, which come in as system
# includes), and the sanitizer build.
add_library(memscript_warnings INTERFACE)
target_compile_options(memscript_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor>)
# GCC 13 (the GPU machine's compiler) warns "forming offset 8 is out of the bounds [0, 8]" and
# "writing between 9 and 9223372036854775807 bytes into a region of size 8" in
# std::vector<bool>::reserve once it is inlined from libtorch's torch::autograd::Function::apply
# into each custom op; the vector is libtorch's own and the warning is a false positive that the
# system-include marking cannot hide, because it is raised after inlining. GCC 12 is quiet.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 13
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14)
  target_compile_options(memscript_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-array-bounds -Wno-stringop-overflow>)
endif()

if(MEMSCRIPT_SANITIZE)
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()
