# Finds MySQL Connector/C++ 1.1 (the JDBC-style API; Debian: libmysqlcppconn-dev), which ships
# no CMake config. Defines MySQL::ConnectorCpp.
find_path(MySQLConnectorCpp_INCLUDE_DIR cppconn/driver.h)
find_library(MySQLConnectorCpp_LIBRARY NAMES mysqlcppconn)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MySQLConnectorCpp
  REQUIRED_VARS MySQLConnectorCpp_LIBRARY MySQLConnectorCpp_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install it with scripts/install-deps (Debian package libmysqlcppconn-dev)")
if(MySQLConnectorCpp_FOUND AND NOT TARGET MySQL::ConnectorCpp)
  add_library(MySQL::ConnectorCpp UNKNOWN IMPORTED)
  set_target_properties(MySQL::ConnectorCpp PROPERTIES
    IMPORTED_LOCATION "${MySQLConnectorCpp_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MySQLConnectorCpp_INCLUDE_DIR}")
endif()
mark_as_advanced(MySQLConnectorCpp_INCLUDE_DIR MySQLConnectorCpp_LIBRARY)
