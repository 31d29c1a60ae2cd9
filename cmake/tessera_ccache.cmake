# Compile through ccache when it is installed. Include this before the first target is created:
# CMAKE_CXX_COMPILER_LAUNCHER initialises each target's CXX_COMPILER_LAUNCHER when the target is
# made. A launcher chosen by the user (-DCMAKE_CXX_COMPILER_LAUNCHER=..., or the environment
# variable of the same name) wins; pass -DCMAKE_CXX_COMPILER_LAUNCHER= to turn ccache off.
if(NOT DEFINED CMAKE_CXX_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_CXX_COMPILER_LAUNCHER})
  find_program(TESSERA_CCACHE_PROGRAM ccache DOC "ccache, used as the compiler launcher when found")
  mark_as_advanced(TESSERA_CCACHE_PROGRAM)
  if(TESSERA_CCACHE_PROGRAM)
    # The test binaries use a precompiled header (tests/CMakeLists.txt): ccache caches such
    # compilations only with this sloppiness (it hashes the .gch itself, so a changed header
    # still misses).
    set(CMAKE_CXX_COMPILER_LAUNCHER "${CMAKE_COMMAND};-E;env;CCACHE_SLOPPINESS=pch_defines,time_macros;${TESSERA_CCACHE_PROGRAM}")
  endif()
endif()
