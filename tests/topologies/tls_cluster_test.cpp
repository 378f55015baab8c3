// Redis Cluster over TLS (rediss+cluster://, docs/tls.md) on a private 3-master cluster whose
// nodes serve TLS (LocalRedisCluster with tls): every node the client reaches, the seeds, the
// masters of CLUSTER SLOTS and the targets of MOVED and ASK, is reached over TLS and verified
// against the URL's CA by its IP address; the connections of one client share one SSL_CTX; a
// CA that does not sign the nodes and a plain-text cluster are typed errors, without a wait.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "lockstep/cache/redis_cache.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_cluster.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// One TLS cluster for this file's tests (no replicas: nothing here fails a master over).
LocalRedisCluster& tls_cluster() {
    static LocalRedisCluster instance(LocalRedisClusterOptions{.masters = 3, .replicas_per_master = 0, .tls = true});
    return instance;
}

// The node listening on TLS port `port`, or -1.
int node_of_tls_port(int port) {
    for (std::size_t n = 0; n < tls_cluster().size(); ++n) {
        if (tls_cluster().tls_port(n) == port) return static_cast<int>(n);
    }
    return -1;
}

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// A plain-text connection to one node's plain port (the harness's side door: no routing, no
// TLS); error replies are returned.
RedisReply on_plain_node(std::size_t node, const std::vector<std::string>& args) {
    RedisOptions o;
    o.port = tls_cluster().port(node);
    return RedisConnection(o).command(args);
}

// Names whose slots are served by three different masters (by the cluster's own view).
std::vector<std::string> one_name_per_master(const std::string& prefix) {
    std::map<int, std::string> by_master;
    for (int i = 0; by_master.size() < 3 && i < 1000; ++i) {
        const std::string name = prefix + std::to_string(i);
        by_master.emplace(tls_cluster().master_of_slot(redis_cluster_slot(name)), name);
    }
    std::vector<std::string> names;
    for (const auto& [master, name] : by_master) names.push_back(name);
    return names;
}

RedisOptions tls_options() {
    RedisOptions o = tls_cluster().redis_options();
    o.failover_wait = 10s;
    return o;
}

TEST(TlsClusterTest, ACacheRoundTripReachesEveryMasterOverTlsOnItsTlsPort) {
    RedisClient client(tls_options());
    RedisCache cache(client);
    const std::vector<std::string> keys = one_name_per_master(unique_lock_prefix() + "k");
    ASSERT_EQ(keys.size(), 3u);
    std::set<int> masters;
    for (const auto& k : keys) {
        cache.set(k, "v-" + k, 60s);
        EXPECT_EQ(cache.get(k), "v-" + k);
        // The map the client learnt from CLUSTER SLOTS over TLS names TLS ports only.
        const int port = port_of(client.cluster_master_of(k));
        const int node = node_of_tls_port(port);
        EXPECT_GE(node, 0) << "the client reached " << port << ", not a TLS port";
        masters.insert(node);
        // The value is on that node (asked on its plain port, without routing).
        EXPECT_EQ(on_plain_node(static_cast<std::size_t>(node), {"GET", k}).str(), "v-" + k);
        EXPECT_TRUE(cache.remove(k));
    }
    EXPECT_EQ(masters.size(), 3u);
}

TEST(TlsClusterTest, ARedisMutexOnEachMasterLocksExcludesAndUnlocksOverTls) {
    RedisClient first_redis(tls_options());
    RedisClient second_redis(tls_options());
    LockClientOptions lo;
    lo.prefix = unique_lock_prefix();
    RedisLockClient first(first_redis, lo);
    RedisLockClient second(second_redis, lo);
    for (const auto& name : one_name_per_master("m")) {
        RedisMutex a(first, name, {.lease = 30s});
        RedisMutex b(second, name, {.lease = 30s});
        ASSERT_TRUE(a.try_lock()) << name;
        EXPECT_FALSE(b.try_lock()) << name << ": held over TLS, yet granted to another client";
        a.unlock_checked();
        ASSERT_TRUE(b.try_lock()) << name;
        b.unlock_checked();
    }
}

// A slot migrates from A to B: the TLS client is told "ASK <B's TLS port>", then, once the slot
// is B's, "MOVED <B's TLS port>" (tls-cluster: a TLS client is given TLS ports), and follows both
// over TLS, verifying B's certificate against 127.0.0.1.
TEST(TlsClusterTest, AskAndMovedTargetsAreReachedOverTls) {
    RedisClient client(tls_options());
    const std::string k = unique_prefix() + "migrating";
    const std::string slot = std::to_string(redis_cluster_slot(k));
    const int source = node_of_tls_port(port_of(client.cluster_master_of(k)));
    ASSERT_GE(source, 0);
    const int target = (source + 1) % 3;
    const auto s = static_cast<std::size_t>(source), t = static_cast<std::size_t>(target);
    const std::string source_id = on_plain_node(s, {"CLUSTER", "MYID"}).str();
    const std::string target_id = on_plain_node(t, {"CLUSTER", "MYID"}).str();
    on_plain_node(t, {"CLUSTER", "SETSLOT", slot, "IMPORTING", source_id});
    on_plain_node(s, {"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id});

    client.set(k, "by-ask", 60s);  // the source answers ASK (the key is not there)
    EXPECT_EQ(client.get(k), "by-ask");
    // A plain-text client is sent to the target's plain port; the TLS client was sent to its TLS port.
    const RedisReply ask = on_plain_node(s, {"EXISTS", k});
    ASSERT_TRUE(ask.is_error()) << "the source has the key";
    EXPECT_EQ(ask.error_message(), "ASK " + slot + " 127.0.0.1:" + std::to_string(tls_cluster().port(t)));

    for (std::size_t n = 0; n < 3; ++n) on_plain_node(n, {"CLUSTER", "SETSLOT", slot, "NODE", target_id});
    EXPECT_EQ(client.get(k), "by-ask");  // MOVED, followed
    EXPECT_EQ(port_of(client.cluster_master_of(k)), tls_cluster().tls_port(t));
    client.del({k});

    // The slot goes back, so the other tests see redis-cli's layout.
    on_plain_node(s, {"CLUSTER", "SETSLOT", slot, "IMPORTING", target_id});
    on_plain_node(t, {"CLUSTER", "SETSLOT", slot, "MIGRATING", source_id});
    for (std::size_t n = 0; n < 3; ++n) on_plain_node(n, {"CLUSTER", "SETSLOT", slot, "NODE", source_id});
    ASSERT_TRUE(tls_cluster().wait_until_ok(10s));
}

// The CA is read once per client: with it gone, the client still opens connections to nodes it
// had not reached yet; a client made afterwards cannot.
TEST(TlsClusterTest, TheConnectionsOfOneClientShareOneContextReadOnce) {
    const std::filesystem::path dir = std::filesystem::path(tls_cluster().tls_certificates().dir);
    const std::filesystem::path ca = dir / "ca-copy.pem";
    std::filesystem::copy_file(tls_cluster().tls_certificates().ca_file, ca,
                               std::filesystem::copy_options::overwrite_existing);
    RedisOptions o = tls_options();
    o.tls.ca_file = ca.string();
    RedisClient client(o);
    const std::vector<std::string> keys = one_name_per_master(unique_prefix() + "c");
    client.set(keys[0], "x", 60s);  // the map and one master: the context is built
    std::filesystem::remove(ca);
    for (const auto& k : keys) client.set(k, "x", 60s);  // the other masters: new connections
    for (const auto& k : keys) EXPECT_EQ(client.get(k), "x");
    client.del(keys);

    RedisClient later(o);
    try {
        later.get(keys[0]);
        ADD_FAILURE() << "a new client connected without its CA file";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "tls_ca") << e.what();
    }
}

TEST(TlsClusterTest, ACaThatDidNotSignTheNodesIsAConfigErrorNamingTheCauseWithoutWaiting) {
    RedisOptions o = tls_options();
    o.tls.ca_file = tls_cluster().tls_certificates().foreign_ca_file;
    o.failover_wait = 20s;
    RedisClient client(o);
    const auto start = Clock::now();
    try {
        client.get("k");
        ADD_FAILURE() << "connected with a CA that did not sign the nodes";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "server certificate") << e.what();
        EXPECT_NE(std::string(e.what()).find("the server's certificate failed verification"), std::string::npos)
            << e.what();
    }
    EXPECT_LT(Clock::now() - start, 5s) << "waited for a failover that cannot fix a certificate";
}

TEST(TlsClusterTest, AServerNameTheCertificateDoesNotCarryIsRefusedForTheNodes) {
    // Every node is reached by 127.0.0.1, which the certificate names; a server name the
    // certificate does not carry is refused for the seed and would be for every node.
    RedisOptions o = tls_options();
    o.tls.server_name = "wrong-host.invalid";
    RedisClient client(o);
    try {
        client.get("k");
        ADD_FAILURE() << "accepted a certificate for another name";
    } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("hostname mismatch"), std::string::npos) << e.what();
    }
}

TEST(TlsClusterTest, APlainTextClusterOnARedissUrlIsATypedErrorNamingTheHandshake) {
    static LocalRedisCluster plain(LocalRedisClusterOptions{.masters = 3, .replicas_per_master = 0});
    std::string url = plain.url();  // redis+cluster://...
    url.insert(5, "s");
    RedisOptions o = parse_redis_url(url + "?tls_ca=" + tls_cluster().tls_certificates().ca_file);
    ASSERT_TRUE(o.tls.enabled);
    o.connect_timeout = 500ms;
    o.failover_wait = 2s;
    RedisClient client(o);
    const auto start = Clock::now();
    try {
        client.get("k");
        ADD_FAILURE() << "a plain-text cluster answered over TLS";
    } catch (const ConnectionError& e) {
        EXPECT_NE(std::string(e.what()).find("TLS handshake"), std::string::npos) << e.what();
    }
    EXPECT_LT(Clock::now() - start, 10s);
}

}  // namespace
}  // namespace lockstep::test

