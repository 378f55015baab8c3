// The private servers of one test binary: started on first use, stopped at exit. Honour
// LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL like everything else.
#pragma once

#include <string>

#include "lockstep/servers/local_servers.h"

namespace lockstep::test {

LocalServers& servers();

// A key prefix unique to this process and call, with a hash tag so multi-key scripts stay
// cluster-legal: "{t<pid>_<n>}:".
std::string unique_prefix();

}  // namespace lockstep::test

// Skips the current test when the servers are external (restarts need a private server).
#define LOCKSTEP_REQUIRE_OWNED_REDIS()                                                  \
    do {                                                                                \
        if (!::lockstep::test::servers().owns_redis()) GTEST_SKIP() << "external Redis"; \
    } while (0)
#define LOCKSTEP_REQUIRE_OWNED_MYSQL()                                                  \
    do {                                                                                \
        if (!::lockstep::test::servers().owns_mysql()) GTEST_SKIP() << "external MySQL"; \
    } while (0)
