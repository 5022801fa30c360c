# The CUDA toolkit. COLL_WITH_CUDA, ON by default where nvcc is found (CUDACXX, or
# /usr/local/cuda), builds the CUDA module kernels/cuda (libcollective_cuda.so), which the daemon
# and the library load at run time where a driver is; OFF leaves every CUDA file and lookup out.
# Sanitizer and fuzzing builds leave it out unless asked (-DCOLL_WITH_CUDA=ON): the sanitizers
# do not see device code, nothing of the module runs without a device, and its nvcc time would
# be spent once more per build. Machine code for sm_90 (H100, H200) and PTX of compute_90 for
# later GPUs, which the driver compiles when it first loads the module; set
# CMAKE_CUDA_ARCHITECTURES to build for others (e.g. "80-real;90-real;90-virtual").
set(coll_cuda_default OFF)
if(NOT DEFINED COLL_WITH_CUDA AND (COLL_SANITIZE OR COLL_FUZZ))
  set(COLL_WITH_CUDA OFF CACHE BOOL "Build the CUDA module (kernels/cuda)")
endif()
if(NOT DEFINED COLL_WITH_CUDA OR COLL_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "nvcc")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(coll_cuda_default ON)
  endif()
endif()
option(COLL_WITH_CUDA "Build the CUDA module (kernels/cuda) where a CUDA toolkit is found"
       ${coll_cuda_default})

if(COLL_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "COLL_WITH_CUDA=ON but no CUDA compiler was found "
                        "(set CUDACXX or CMAKE_CUDA_COMPILER, or -DCOLL_WITH_CUDA=OFF)")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED) # the toolkit of CMAKE_CUDA_COMPILER
  message(STATUS "collectived: CUDA module ON (${CMAKE_CUDA_COMPILER} "
                 "${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "collectived: CUDA module OFF")
endif()
