# Finds hiredis (Debian ships 0.14 with a pkg-config file but no CMake config).
# Defines Hiredis::Hiredis.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_HIREDIS QUIET hiredis)
endif()
find_path(Hiredis_INCLUDE_DIR hiredis/hiredis.h HINTS ${PC_HIREDIS_INCLUDE_DIRS})
find_library(Hiredis_LIBRARY NAMES hiredis HINTS ${PC_HIREDIS_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Hiredis REQUIRED_VARS Hiredis_LIBRARY Hiredis_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install it with scripts/install-deps (Debian package libhiredis-dev)")
if(Hiredis_FOUND AND NOT TARGET Hiredis::Hiredis)
  add_library(Hiredis::Hiredis UNKNOWN IMPORTED)
  set_target_properties(Hiredis::Hiredis PROPERTIES
    IMPORTED_LOCATION "${Hiredis_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Hiredis_INCLUDE_DIR}")
endif()
mark_as_advanced(Hiredis_INCLUDE_DIR Hiredis_LIBRARY)
