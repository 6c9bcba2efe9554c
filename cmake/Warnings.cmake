# Warnings on for our own code (never for libtorch's headers, which come in as system
# includes), and the sanitizer build.
add_library(memscript_warnings INTERFACE)
target_compile_options(memscript_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor>)

if(MEMSCRIPT_SANITIZE)
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()
