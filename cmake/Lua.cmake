# Lua 5.4, built here as a static C library from the upstream release source that
# scripts/bootstrap.sh fetches, given in MEMSCRIPT_LUA_SOURCE (scripts/bootstrap.sh --print-lua).
# Debian 12's liblua5.4 is 5.4.4, where nested coroutine.close calls overflow the C stack and
# crash the process (https://www.lua.org/bugs.html#5.4.4-9, tests/scripts/coroutine_close_nesting.lua).
#
# Defines memscript::lua: the core and the standard libraries (not lua.c/luac.c), compiled as
# C, so Lua errors are longjmps as the bindings expect; its public headers (lua.hpp among them)
# come in as system includes.
set(_lua_src "${MEMSCRIPT_LUA_SOURCE}/src")
if(NOT MEMSCRIPT_LUA_SOURCE OR NOT EXISTS "${_lua_src}/lua.h" OR NOT EXISTS "${_lua_src}/lua.hpp")
  message(FATAL_ERROR
    "memscript: MEMSCRIPT_LUA_SOURCE ('${MEMSCRIPT_LUA_SOURCE}') is not a Lua release source "
    "tree with src/lua.h and src/lua.hpp; run scripts/bootstrap.sh and pass "
    "-DMEMSCRIPT_LUA_SOURCE=\"$(scripts/bootstrap.sh --print-lua)\"")
endif()

file(STRINGS "${_lua_src}/lua.h" _lua_num REGEX "^#define[ \t]+LUA_VERSION_NUM[ \t]+[0-9]+")
file(STRINGS "${_lua_src}/lua.h" _lua_release
     REGEX "^#define[ \t]+LUA_VERSION_RELEASE[ \t]+\"[0-9]+\"")
string(REGEX REPLACE ".*[ \t]([0-9]+)$" "\\1" _lua_num "${_lua_num}")
string(REGEX REPLACE ".*\"([0-9]+)\"$" "\\1" _lua_release "${_lua_release}")
# 5.4.5 has the fix but changed lua_resetthread's signature; 5.4.6 restored it.
if(NOT _lua_num STREQUAL "504" OR NOT _lua_release MATCHES "^[0-9]+$" OR _lua_release LESS 6)
  message(FATAL_ERROR "memscript: ${MEMSCRIPT_LUA_SOURCE} holds Lua ${_lua_num}.${_lua_release}; "
                      "memscript needs Lua 5.4.6 or a later 5.4 release")
endif()
set(MEMSCRIPT_LUA_VERSION "5.4.${_lua_release}")

# The files of the upstream src/Makefile's CORE_O and LIB_O.
set(_lua_modules
  lapi lcode lctype ldebug ldo ldump lfunc lgc llex lmem lobject lopcodes lparser lstate lstring
  ltable ltm lundump lvm lzio
  lauxlib lbaselib lcorolib ldblib liolib lmathlib loadlib loslib lstrlib ltablib lutf8lib linit)
list(TRANSFORM _lua_modules PREPEND "${_lua_src}/" OUTPUT_VARIABLE _lua_sources)
list(TRANSFORM _lua_sources APPEND ".c")

add_library(memscript_lua STATIC ${_lua_sources})
add_library(memscript::lua ALIAS memscript_lua)
set_target_properties(memscript_lua PROPERTIES
  C_STANDARD 99
  C_EXTENSIONS ON
  POSITION_INDEPENDENT_CODE ON)
# As upstream's `make linux` and Debian's package build it: POSIX facilities, dlopen for C
# modules, and the 5.3 compatibility functions (math.pow and the like) scripts may use.
target_compile_definitions(memscript_lua PRIVATE LUA_USE_LINUX LUA_COMPAT_5_3)
# Lua's own code is not ours to warn about, nor to hold to UBSan's no-recover rule (Debian's
# library was never instrumented either); AddressSanitizer stays on in the sanitizer build.
target_compile_options(memscript_lua PRIVATE
  -w $<$<BOOL:${MEMSCRIPT_SANITIZE}>:-fno-sanitize=undefined>)
target_link_libraries(memscript_lua PUBLIC m ${CMAKE_DL_LIBS})

# Only the public headers are exposed, copied into the build tree so that Lua's internal headers
# (lstate.h, ...) stay out of everybody's include path.
set(_lua_include "${CMAKE_CURRENT_BINARY_DIR}/lua-include")
foreach(header lua.h luaconf.h lualib.h lauxlib.h lua.hpp)
  configure_file("${_lua_src}/${header}" "${_lua_include}/${header}" COPYONLY)
endforeach()
target_include_directories(memscript_lua SYSTEM INTERFACE "${_lua_include}")
message(STATUS "memscript: Lua ${MEMSCRIPT_LUA_VERSION} from ${MEMSCRIPT_LUA_SOURCE}")
