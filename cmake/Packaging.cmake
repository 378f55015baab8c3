# Debian packages (cpack -G DEB in the build tree) and the pkg-config file (docs/operations.md).
#
#   liblockstep-dev       the static libraries (lockstep, lockstep_testing, lockstep_prometheus
#                         when built), every public header, the CMake package
#                         (find_package(lockstep)) and lockstep.pc / lockstep-testing.pc
#   lockstep-invalidator  the lockstep-invalidator daemon (invalidation/tools/)
#
# The libraries are static, so a service that links them needs the -dev packages of what
# lockstep links; the daemon needs only the runtime libraries. Names are Debian 12's (bookworm).
# tests/package builds examples/inventory_service against the unpacked packages.

# ---- pkg-config ------------------------------------------------------------------------------
# prefix is found from the .pc file's own place (${pcfiledir}), so one file serves the Debian
# package (/usr), `cmake --install --prefix X` and a package unpacked into a scratch root.
set(lockstep_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH lockstep_pc_to_prefix "/prefix/${lockstep_pc_dir}" "/prefix")
string(REGEX REPLACE "/$" "" lockstep_pc_to_prefix "${lockstep_pc_to_prefix}")
# What lockstep links privately. The libraries are static, so these are on Libs (a shared build
# moves them to Libs.private). MySQL Connector/C++ and the ZooKeeper C client ship no .pc file.
set(lockstep_pc_requires "spdlog fmt nlohmann_json")
set(lockstep_pc_private_libs "-lhiredis -lmysqlcppconn -lmariadb -lssl -lcrypto")
set(lockstep_pc_cflags "")
if(LOCKSTEP_WITH_ZOOKEEPER)
  string(APPEND lockstep_pc_private_libs " -lzookeeper_mt")
  set(lockstep_pc_cflags "-DLOCKSTEP_HAVE_ZOOKEEPER=1")
endif()
get_target_property(lockstep_type lockstep TYPE)
if(lockstep_type STREQUAL "STATIC_LIBRARY")
  set(lockstep_pc_libs "-llockstep ${lockstep_pc_private_libs} -pthread")
  set(lockstep_pc_libs_private "")
else()
  set(lockstep_pc_libs "-llockstep -pthread")
  set(lockstep_pc_libs_private "${lockstep_pc_private_libs}")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/lockstep.pc.in" "${PROJECT_BINARY_DIR}/lockstep.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/lockstep.pc" DESTINATION "${lockstep_pc_dir}" COMPONENT dev)
if(TARGET lockstep_testing)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/lockstep-testing.pc.in" "${PROJECT_BINARY_DIR}/lockstep-testing.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/lockstep-testing.pc" DESTINATION "${lockstep_pc_dir}" COMPONENT dev)
endif()

# The example systemd unit, beside the daemon (docs/invalidator.md).
install(FILES "${PROJECT_SOURCE_DIR}/ops/systemd/lockstep-invalidator.service"
  DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/lockstep-invalidator/examples" COMPONENT invalidator)

# ---- Debian packages -------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME lockstep)
set(CPACK_PACKAGE_VENDOR "lockstep")
set(CPACK_PACKAGE_CONTACT "lockstep maintainers <lockstep@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev invalidator)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/lockstep/lockstep")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME liblockstep-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "lockstep: static libraries, headers, CMake package and pkg-config files\n Redis cache kept consistent with MySQL, with distributed locks over Redis, Redlock,\n MySQL GET_LOCK and ZooKeeper. find_package(lockstep) or pkg-config lockstep.")
set(lockstep_dev_depends
  "libhiredis-dev" "libmysqlcppconn-dev" "libmariadb-dev" "libssl-dev"
  "libspdlog-dev" "libfmt-dev" "nlohmann-json3-dev")
if(LOCKSTEP_WITH_ZOOKEEPER)
  list(APPEND lockstep_dev_depends "libzookeeper-mt-dev")
endif()
list(JOIN lockstep_dev_depends ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
if(TARGET lockstep_prometheus)
  # Only find_package(lockstep COMPONENTS prometheus) needs it.
  set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "prometheus-cpp-dev")
endif()

set(CPACK_DEBIAN_INVALIDATOR_PACKAGE_NAME lockstep-invalidator)
set(CPACK_DEBIAN_INVALIDATOR_PACKAGE_SECTION database)
set(CPACK_COMPONENT_INVALIDATOR_DESCRIPTION
  "lockstep-invalidator: deletes Redis cache keys of rows changed in MySQL/MariaDB\n Follows a MariaDB binary log as a replica and deletes the cache keys of every changed row\n of the configured tables; optionally runs the consistency inspector.")
# Every library lockstep-invalidator is linked with (tests/package checks the list against the
# binary's NEEDED entries).
set(lockstep_invalidator_depends
  "libc6" "libstdc++6" "libgcc-s1" "libhiredis0.14" "libmysqlcppconn7v5" "libmariadb3" "libssl3"
  "libspdlog1.10" "libfmt9")
if(LOCKSTEP_WITH_ZOOKEEPER)
  list(APPEND lockstep_invalidator_depends "libzookeeper-mt2")
endif()
if(LOCKSTEP_INVALIDATOR_WITH_PROMETHEUS)
  list(APPEND lockstep_invalidator_depends "libprometheus-cpp-core1.0" "libprometheus-cpp-pull1.0")
endif()
list(JOIN lockstep_invalidator_depends ", " CPACK_DEBIAN_INVALIDATOR_PACKAGE_DEPENDS)

include(CPack)
