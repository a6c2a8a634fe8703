# Find MySQL Connector/C++ 1.1 (Debian libmysqlcppconn-dev ships no CMake config).
# Defines MySQLConnectorCpp_FOUND and the imported target MySQLConnectorCpp::MySQLConnectorCpp.
find_path(MySQLConnectorCpp_INCLUDE_DIR NAMES cppconn/driver.h mysql_driver.h)
find_library(MySQLConnectorCpp_LIBRARY NAMES mysqlcppconn)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MySQLConnectorCpp
  REQUIRED_VARS MySQLConnectorCpp_LIBRARY MySQLConnectorCpp_INCLUDE_DIR)
if(MySQLConnectorCpp_FOUND AND NOT TARGET MySQLConnectorCpp::MySQLConnectorCpp)
  add_library(MySQLConnectorCpp::MySQLConnectorCpp UNKNOWN IMPORTED)
  set_target_properties(MySQLConnectorCpp::MySQLConnectorCpp PROPERTIES
    IMPORTED_LOCATION "${MySQLConnectorCpp_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MySQLConnectorCpp_INCLUDE_DIR}")
endif()
mark_as_advanced(MySQLConnectorCpp_INCLUDE_DIR MySQLConnectorCpp_LIBRARY)
