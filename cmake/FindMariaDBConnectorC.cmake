# Finds MariaDB Connector/C (libmariadb) with its replication API, mariadb_rpl.h (Debian
# libmariadb-dev). The invalidation layer's binlog follower uses it. Defines MariaDB::ConnectorC.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LIBMARIADB QUIET libmariadb)
endif()
find_path(MariaDBConnectorC_INCLUDE_DIR mariadb_rpl.h HINTS ${PC_LIBMARIADB_INCLUDE_DIRS} PATH_SUFFIXES mariadb)
find_library(MariaDBConnectorC_LIBRARY NAMES mariadb HINTS ${PC_LIBMARIADB_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MariaDBConnectorC REQUIRED_VARS MariaDBConnectorC_LIBRARY MariaDBConnectorC_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install it with scripts/install-deps (Debian package libmariadb-dev)")
if(MariaDBConnectorC_FOUND AND NOT TARGET MariaDB::ConnectorC)
  add_library(MariaDB::ConnectorC UNKNOWN IMPORTED)
  set_target_properties(MariaDB::ConnectorC PROPERTIES
    IMPORTED_LOCATION "${MariaDBConnectorC_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MariaDBConnectorC_INCLUDE_DIR}")
endif()
mark_as_advanced(MariaDBConnectorC_INCLUDE_DIR MariaDBConnectorC_LIBRARY)
