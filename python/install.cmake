# Run by `cmake --install` (python/CMakeLists.txt sets COLL_PY_*): installs the package where
# Debian's python3 finds it for the install prefix, and writes _installed.py, the relative way
# from the installed package to the installed library.
if(COLL_PY_DIR STREQUAL "" AND CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(COLL_PY_DIR lib/python3/dist-packages)
elseif(COLL_PY_DIR STREQUAL "")
  set(COLL_PY_DIR ${COLL_PY_OTHER_PREFIX_DIR})
endif()
set(_pkg "${CMAKE_INSTALL_PREFIX}/${COLL_PY_DIR}/collective")
file(RELATIVE_PATH _to_lib "${_pkg}" "${CMAKE_INSTALL_PREFIX}/${COLL_PY_LIBDIR}")
file(GLOB _sources "${COLL_PY_SOURCE_DIR}/*.py")
file(INSTALL ${_sources} DESTINATION "${_pkg}") # file(INSTALL) adds DESTDIR itself
message(STATUS "Installing: $ENV{DESTDIR}${_pkg}/_installed.py")
file(WRITE "$ENV{DESTDIR}${_pkg}/_installed.py"
     "\"\"\"Written by cmake --install (python/install.cmake).\"\"\"\n\n"
     "LIBDIR_FROM_PACKAGE = \"${_to_lib}\"\n")
# The torch backend's extension, with its RPATH the same way to the library, and the files that
# register the backend when torch.distributed is imported (collective-torch.pth), beside the
# package.
if(COLL_PY_EXTENSION)
  get_filename_component(_ext "${COLL_PY_EXTENSION}" NAME)
  file(INSTALL "${COLL_PY_EXTENSION}" DESTINATION "${_pkg}")
  file(RPATH_SET FILE "$ENV{DESTDIR}${_pkg}/${_ext}" NEW_RPATH "$ORIGIN/${_to_lib}")
endif()
file(INSTALL ${COLL_PY_SITE_FILES} DESTINATION "${CMAKE_INSTALL_PREFIX}/${COLL_PY_DIR}")
