# ccache when present. The sloppiness settings let it cache translation units built with
# a precompiled header, which is where almost all of the build time goes; the base folder
# makes paths relative, so a fresh clone elsewhere hits the cache of an earlier one.
find_program(MEMSCRIPT_CCACHE ccache)
if(MEMSCRIPT_CCACHE)
  set(_ccache_env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
                  CCACHE_BASEDIR=${PROJECT_SOURCE_DIR})
  set(CMAKE_C_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${_ccache_env} ${MEMSCRIPT_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${_ccache_env} ${MEMSCRIPT_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${MEMSCRIPT_CCACHE})
  message(STATUS "memscript: compiling through ccache (${MEMSCRIPT_CCACHE})")
endif()
