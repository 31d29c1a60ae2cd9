# Install rules and package config for the `tessera` library target.
#
# Installs the static (or shared) library, every header under include/tessera/ (detail/ and the
# X-macro .inc files included) and a CMake package, so that a consumer writes
#
#   find_package(tessera 0.1 CONFIG REQUIRED)   # `Tessera` works too
#   target_link_libraries(app PRIVATE tessera::tessera)
#
# and, when the MPI transport was built, `find_package(tessera CONFIG REQUIRED COMPONENTS mpi)`
# and `tessera::mpi`.
#
# The config file is named tessera-config.cmake: find_package(<Name>) looks for
# <Name>Config.cmake *and* <lower-case name>-config.cmake, so one lower-case file serves both
# spellings. The build tree gets the same files (export(EXPORT ...)), so a consumer can also use
# -Dtessera_DIR=<build dir> without installing. tests/install/ checks both.
include(CMakePackageConfigHelpers)

set(TESSERA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tessera"
    CACHE STRING "Where the tessera CMake package files are installed, relative to the prefix")
mark_as_advanced(TESSERA_INSTALL_CMAKEDIR)

install(TARGETS tessera
  EXPORT TesseraTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
# The MPI transport, when it was built: tessera::mpi (component `mpi`). It has no headers of its
# own (programs use tessera/device.h); linking it makes `mpirun -np N app` run one device per
# rank. Its MPI::MPI_CXX dependency is found again by the package config.
if(TARGET tessera_mpi)
  install(TARGETS tessera_mpi
    EXPORT TesseraTargets
    ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
    LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  set(TESSERA_CONFIG_MPI ON)
else()
  set(TESSERA_CONFIG_MPI OFF)
endif()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/tessera"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
  FILES_MATCHING PATTERN "*.h" PATTERN "*.inc")

# A static library's PRIVATE dependencies appear in the export as $<LINK_ONLY:hwy::hwy> and
# $<LINK_ONLY:fmt::fmt>, so the config has to find those packages too; a shared one needs only
# its PUBLIC dependencies.
get_target_property(_tessera_type tessera TYPE)
if(_tessera_type STREQUAL "STATIC_LIBRARY")
  set(TESSERA_CONFIG_STATIC ON)
else()
  set(TESSERA_CONFIG_STATIC OFF)
endif()
unset(_tessera_type)

set(_tessera_cfg_in "${PROJECT_SOURCE_DIR}/cmake/TesseraConfig.cmake.in")
# Install tree.
configure_package_config_file("${_tessera_cfg_in}"
  "${PROJECT_BINARY_DIR}/cmake/install/tessera-config.cmake"
  INSTALL_DESTINATION "${TESSERA_INSTALL_CMAKEDIR}")
# Build tree: the package is the build directory itself.
configure_package_config_file("${_tessera_cfg_in}"
  "${PROJECT_BINARY_DIR}/tessera-config.cmake"
  INSTALL_DESTINATION "${PROJECT_BINARY_DIR}"
  INSTALL_PREFIX "${PROJECT_BINARY_DIR}")
unset(_tessera_cfg_in)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/tessera-config-version.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)

install(EXPORT TesseraTargets
  NAMESPACE tessera::
  FILE tessera-targets.cmake
  DESTINATION "${TESSERA_INSTALL_CMAKEDIR}")
# The static library's libxsmm dependency is found by the same file in the consumer.
configure_file("${PROJECT_SOURCE_DIR}/cmake/tessera_libxsmm.cmake"
  "${PROJECT_BINARY_DIR}/tessera_libxsmm.cmake" COPYONLY)
install(FILES
  "${PROJECT_BINARY_DIR}/tessera_libxsmm.cmake"
  "${PROJECT_BINARY_DIR}/cmake/install/tessera-config.cmake"
  "${PROJECT_BINARY_DIR}/tessera-config-version.cmake"
  DESTINATION "${TESSERA_INSTALL_CMAKEDIR}")
export(EXPORT TesseraTargets
  NAMESPACE tessera::
  FILE "${PROJECT_BINARY_DIR}/tessera-targets.cmake")
