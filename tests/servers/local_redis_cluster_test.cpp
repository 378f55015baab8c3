// LocalRedisCluster against the real binaries: it forms (3 masters, one replica each), a killed
// master is replaced by its replica, the restarted node rejoins, and nothing survives it.
#include "lockstep/servers/local_redis_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

using test::eventually;

bool process_exists(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

TEST(LocalRedisCluster, FormsFailsOverRejoinsAndLeavesNothingRunning) {
    std::vector<int> pids;
    {
        LocalRedisCluster cluster;
        ASSERT_EQ(cluster.size(), 6u);
        EXPECT_EQ(cluster.masters().size(), 3u);
        const RedisOptions o = cluster.redis_options();
        EXPECT_EQ(o.topology, RedisTopology::Cluster);
        EXPECT_EQ(o.nodes.size(), 6u);
        for (std::size_t i = 0; i < cluster.size(); ++i) pids.push_back(cluster.pid(i));

        RedisOptions one;
        one.port = cluster.port(0);
        RedisClient node0(one);
        EXPECT_NE(node0.command({"CLUSTER", "INFO"}).str().find("cluster_state:ok"), std::string::npos);

        // Kill the master of slot 0: its replica must take the slot over.
        const int old_master = cluster.master_of_slot(0);
        ASSERT_GE(old_master, 0);
        cluster.kill(static_cast<std::size_t>(old_master));
        EXPECT_TRUE(eventually(
            [&] {
                const int m = cluster.master_of_slot(0);
                return m >= 0 && m != old_master;
            },
            15s));
        EXPECT_TRUE(cluster.wait_until_ok(15s));

        // The restarted node rejoins (as a replica of the promoted one): 3 masters again.
        cluster.start(static_cast<std::size_t>(old_master));
        EXPECT_TRUE(cluster.wait_until_ok(15s));
        EXPECT_EQ(cluster.masters().size(), 3u);
        pids[static_cast<std::size_t>(old_master)] = cluster.pid(static_cast<std::size_t>(old_master));

        EXPECT_THROW(cluster.kill(99), ConfigError);
    }
    for (int pid : pids) EXPECT_FALSE(process_exists(pid)) << "pid " << pid << " survived";
}

}  // namespace
}  // namespace lockstep
