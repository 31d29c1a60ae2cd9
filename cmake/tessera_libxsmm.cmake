# libxsmm, the tile GEMM behind jnp::dot: defines the imported target Tessera::libxsmm.
#
# Debian's libxsmm-dev (1.17) ships static archives only: libxsmm.a, and libxsmmnoblas.a, which
# supplies the BLAS symbols (sgemm_, ...) that libxsmm's own fallback refers to; it must follow
# libxsmm.a on the link line. pkg-config (libxsmm.pc) gives the directories when present.
# Used by the build and, for a static Tessera, by the installed package config (so a consumer
# links libxsmm too), hence no dependency on anything else in this project.
if(NOT TARGET Tessera::libxsmm)
  find_package(Threads REQUIRED)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(TESSERA_PC_LIBXSMM QUIET libxsmm)
  endif()
  find_path(TESSERA_LIBXSMM_INCLUDE_DIR libxsmm.h HINTS ${TESSERA_PC_LIBXSMM_INCLUDE_DIRS})
  find_library(TESSERA_LIBXSMM_LIBRARY xsmm HINTS ${TESSERA_PC_LIBXSMM_LIBRARY_DIRS})
  find_library(TESSERA_LIBXSMM_NOBLAS_LIBRARY xsmmnoblas HINTS ${TESSERA_PC_LIBXSMM_LIBRARY_DIRS})
  if(NOT TESSERA_LIBXSMM_INCLUDE_DIR OR NOT TESSERA_LIBXSMM_LIBRARY
     OR NOT TESSERA_LIBXSMM_NOBLAS_LIBRARY)
    message(FATAL_ERROR "Tessera needs libxsmm for jnp::dot (Debian 12: apt-get install "
                        "libxsmm-dev); found header '${TESSERA_LIBXSMM_INCLUDE_DIR}', "
                        "library '${TESSERA_LIBXSMM_LIBRARY}', '${TESSERA_LIBXSMM_NOBLAS_LIBRARY}'")
  endif()
  add_library(Tessera::libxsmm INTERFACE IMPORTED)
  set_target_properties(Tessera::libxsmm PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_LIBXSMM_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES
      "${TESSERA_LIBXSMM_LIBRARY};${TESSERA_LIBXSMM_NOBLAS_LIBRARY};Threads::Threads;${CMAKE_DL_LIBS};m")
endif()
