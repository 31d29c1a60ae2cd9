# Compiles one compile-fail snippet with the command its build tree would run, without running the
# build tool (cmake -P, from tests/compile_fail/CMakeLists.txt):
#   -DNINJA=<ninja> -DBINARY_DIR=<build tree> -DTARGET=<snippet's object library>
# Ninja keeps one log and one dependency file per build tree, so two `cmake --build` runs in one
# tree cannot overlap; two compilers can, so ctest -j runs these tests side by side. The compiler's
# output goes to stderr for the test's PASS_REGULAR_EXPRESSION, and a failed compile fails the
# script (what decides the control snippet, which has no regular expression).
foreach(var NINJA BINARY_DIR TARGET)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "compile_alone.cmake: -D${var}=... is missing")
  endif()
endforeach()

execute_process(COMMAND "${NINJA}" -C "${BINARY_DIR}" -t commands "${TARGET}"
                OUTPUT_VARIABLE commands ERROR_VARIABLE error RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "ninja -t commands ${TARGET} failed (${result}): ${error}")
endif()
# The object library has one source and no prerequisites, so its compile is the last command.
string(STRIP "${commands}" commands)
string(REGEX REPLACE ".*\n" "" command "${commands}")
if(command STREQUAL "")
  message(FATAL_ERROR "ninja -t commands ${TARGET} printed no command")
endif()

execute_process(COMMAND sh -c "${command}" WORKING_DIRECTORY "${BINARY_DIR}"
                OUTPUT_VARIABLE output ERROR_VARIABLE output RESULT_VARIABLE result)
message("${output}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TARGET} did not compile (exit status ${result})")
endif()
