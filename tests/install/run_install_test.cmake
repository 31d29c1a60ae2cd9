# Driver of the install_consumer test (see CMakeLists.txt). Run as
#   cmake -DBUILD_DIR=... -DPREFIX=... -DWORK_DIR=... -DCONSUMER_SOURCE_DIR=...
#         -DGENERATOR=... -DCXX_COMPILER=... -DCONFIG=... -P run_install_test.cmake
# Every step must succeed; the first failure ends the script with FATAL_ERROR (exit code 1).
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR PREFIX WORK_DIR CONSUMER_SOURCE_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

# Runs one step, echoing its command; fails the test with the step's output when it fails.
function(run_step name)
  list(JOIN ARGN " " shown)
  message(STATUS "[${name}] ${shown}")
  execute_process(COMMAND ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[${name}] failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# Configures, builds and runs the consumer in WORK_DIR/<name> with extra -D arguments.
function(check_consumer name)
  set(bin "${WORK_DIR}/${name}")
  run_step("${name}: configure" "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${bin}"
           -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${CONFIG}"
           -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
           -DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON "-DEXPECT_MPI=${EXPECT_MPI}" ${ARGN})
  run_step("${name}: build" "${CMAKE_COMMAND}" --build "${bin}" --config "${CONFIG}")
  set(exe "${bin}/tessera_consumer")
  if(NOT EXISTS "${exe}")
    set(exe "${bin}/${CONFIG}/tessera_consumer")  # multi-config generators
  endif()
  run_step("${name}: run" "${exe}")
  message(STATUS "[${name}: run] ${step_output}")
  if(NOT step_output MATCHES "consumer: ok")
    message(FATAL_ERROR "[${name}] the consumer did not print 'consumer: ok'")
  endif()
  if(EXPECT_MPI)
    # In process (no launcher: two in-process devices), then one device per rank under mpirun.
    run_step("${name}: run mpi consumer" "${exe}_mpi")
    if(NOT step_output MATCHES "consumer mpi: ok")
      message(FATAL_ERROR "[${name}] the MPI consumer did not print 'consumer mpi: ok'")
    endif()
    if(MPIEXEC)
      run_step("${name}: mpirun mpi consumer" "${MPIEXEC}" --allow-run-as-root --oversubscribe
               --bind-to none -np 2 "${exe}_mpi")
      string(REGEX MATCHALL "consumer mpi: ok" oks "${step_output}")
      list(LENGTH oks n_ok)
      if(NOT n_ok EQUAL 2)
        message(FATAL_ERROR "[${name}] 2 ranks should print 'consumer mpi: ok':\n${step_output}")
      endif()
    endif()
  endif()
endfunction()

file(REMOVE_RECURSE "${PREFIX}" "${WORK_DIR}")

run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
         --config "${CONFIG}")
foreach(f include/tessera/tessera.h include/tessera/detail/error_kinds.inc)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "[install] ${PREFIX}/${f} was not installed")
  endif()
endforeach()

check_consumer(install-tree "-DCMAKE_PREFIX_PATH=${PREFIX}")
check_consumer(build-tree "-Dtessera_DIR=${BUILD_DIR}" "-DTessera_DIR=${BUILD_DIR}")

message(STATUS "install_consumer: ok")
