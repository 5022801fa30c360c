# OpenBLAS for the programs that multiply matrices (the demo trainer's MLP in examples/train,
# PowerSGD next to sgemm in bench/compress-bw): sets COLL_OPENBLAS to a target in the including
# directory, or to "" when OpenBLAS is not installed. pkg-config first (Debian's libopenblas-dev
# ships openblas.pc), then a plain search. Its own cblas.h is needed for
# openblas_set_num_threads(), not the reference one of libblas-dev. Safe to include from several
# directories: the targets are global and made once.
pkg_check_modules(OPENBLAS IMPORTED_TARGET GLOBAL openblas)
if(TARGET PkgConfig::OPENBLAS)
  set(COLL_OPENBLAS PkgConfig::OPENBLAS)
  return()
endif()
find_library(OPENBLAS_LIBRARY openblas)
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread openblas-openmp)
if(NOT OPENBLAS_LIBRARY OR NOT OPENBLAS_INCLUDE_DIR)
  set(COLL_OPENBLAS "")
  return()
endif()
if(NOT TARGET coll_openblas)
  add_library(coll_openblas INTERFACE IMPORTED GLOBAL)
  target_link_libraries(coll_openblas INTERFACE ${OPENBLAS_LIBRARY})
  target_include_directories(coll_openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
endif()
set(COLL_OPENBLAS coll_openblas)
