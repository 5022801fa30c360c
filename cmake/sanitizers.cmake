# Sanitizer and fuzzing builds (hostile input).
#
#   -DCOLL_SANITIZE=address,undefined   every C target we build (daemon, library, tests, tools,
#                                       benchmarks) is compiled and linked with those sanitizers;
#                                       C++ sources (the torch backend) are left alone.
#   -DCMAKE_C_COMPILER=clang -DCOLL_FUZZ=ON
#                                       also builds the libFuzzer harnesses of tests/fuzz (target
#                                       `fuzzers`); implies address,undefined when COLL_SANITIZE
#                                       is empty, and gives every C file libFuzzer's coverage.
#
# A sanitizer build writes tests/sanitizer-env.cmake, which ctest reads before any test: it
# exports the environment the daemon needs under the sanitizers (UCX's memory hooks off) and
# sends every report to ${CMAKE_BINARY_DIR}/sanitizer-logs, where tools/check-sanitizers.sh
# looks for them: a daemon's report counts even when the test that started it swallowed its
# stderr.

# coll_sanitizer_foreign_host(<test>...): these tests (of the calling directory) load our library
# into a program that was not built with the sanitizers (python3 through ctypes): in a build with
# AddressSanitizer they get its runtime in LD_PRELOAD, which must come first, and no leak check
# (the interpreter's own allocations at exit are not ours; the C tests check the library's).
function(coll_sanitizer_foreign_host)
  if(COLL_SANITIZE MATCHES "address" AND ARGN)
    set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT
                 "LD_PRELOAD=${COLL_SANITIZER_PRELOAD}"
                 "ASAN_OPTIONS=${COLL_ASAN_OPTIONS}:detect_leaks=0")
  endif()
endfunction()

set(COLL_SANITIZE "" CACHE STRING
    "Sanitizers for every C target, as for -fsanitize= (e.g. address,undefined); empty: none")
option(COLL_FUZZ "Build the libFuzzer harnesses of tests/fuzz (needs clang)" OFF)

if(COLL_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COLL_FUZZ=ON needs clang's libFuzzer: "
                        "cmake -DCMAKE_C_COMPILER=clang -DCOLL_FUZZ=ON")
  endif()
  if(NOT COLL_SANITIZE)
    set(COLL_SANITIZE address,undefined CACHE STRING "" FORCE)
  endif()
endif()

if(NOT COLL_SANITIZE)
  return()
endif()

set(COLL_SANITIZE_FLAGS -fsanitize=${COLL_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
foreach(flag ${COLL_SANITIZE_FLAGS})
  add_compile_options($<$<COMPILE_LANGUAGE:C>:${flag}>)
  add_link_options($<$<LINK_LANGUAGE:C>:${flag}>)
endforeach()
if(COLL_FUZZ)
  # Coverage feedback from the code under test, not only from the harnesses.
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link>)
endif()
message(STATUS "collectived: sanitizers ${COLL_SANITIZE}")
# Sanitizer builds check the invariants too (common/assert.h).
add_compile_definitions(COLL_ASSERTIONS)

# What a program that was not built with ASan (python3 loading libcollective.so) needs in
# LD_PRELOAD: the runtime, which must come first, and libstdc++, without which the runtime
# cannot find the __cxa_throw it intercepts (torch throws C++ exceptions: a CHECK failure in
# asan_interceptors.cpp otherwise). Exported to tests as COLL_SANITIZER_PRELOAD.
set(COLL_SANITIZER_PRELOAD "")
if(COLL_SANITIZE MATCHES "address")
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    set(preload_libs libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so libstdc++.so.6)
  else()
    set(preload_libs libasan.so libstdc++.so.6)
  endif()
  foreach(lib ${preload_libs})
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${lib}
                    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${path}")
      string(APPEND COLL_SANITIZER_PRELOAD "${path}:")
    else()
      message(WARNING "collectived: ${lib} not found; tests that run our library in python3 "
                      "fail under the sanitizers")
    endif()
  endforeach()
  string(REGEX REPLACE ":$" "" COLL_SANITIZER_PRELOAD "${COLL_SANITIZER_PRELOAD}")
endif()

set(COLL_SANITIZER_LOGS ${CMAKE_BINARY_DIR}/sanitizer-logs)
set(COLL_ASAN_OPTIONS log_path=${COLL_SANITIZER_LOGS}/report:log_exe_name=1)
configure_file(${CMAKE_CURRENT_LIST_DIR}/sanitizer-env.cmake.in
               ${CMAKE_BINARY_DIR}/tests/sanitizer-env.cmake @ONLY)
# The same for a shell, to run the build's daemon or launcher by hand: . build-asan/sanitizer.env
configure_file(${CMAKE_CURRENT_LIST_DIR}/sanitizer.env.in ${CMAKE_BINARY_DIR}/sanitizer.env @ONLY)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES
             ${CMAKE_BINARY_DIR}/tests/sanitizer-env.cmake)
