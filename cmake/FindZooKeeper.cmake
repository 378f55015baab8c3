# Finds the ZooKeeper C client, multi-threaded flavour (Debian: libzookeeper-mt-dev), and defines
# the imported target ZooKeeper::ZooKeeperMt. Its synchronous API needs THREADED defined.
find_path(ZooKeeper_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZooKeeper_LIBRARY zookeeper_mt)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeper REQUIRED_VARS ZooKeeper_LIBRARY ZooKeeper_INCLUDE_DIR)
if(ZooKeeper_FOUND AND NOT TARGET ZooKeeper::ZooKeeperMt)
  add_library(ZooKeeper::ZooKeeperMt UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::ZooKeeperMt PROPERTIES
    IMPORTED_LOCATION "${ZooKeeper_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS THREADED)
endif()
