// The binlog follower over TLS, against a private MariaDB that serves a certificate of a throw-away
// CA (LocalServersOptions::mysql_tls_*). The follower connects as an account created REQUIRE SSL,
// so a follower that did not speak TLS could not follow at all.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "invalidation_test_support.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/servers/tls_certificates.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kFollowerPassword = "follower-secret";

// Removes a directory when it goes: declared before the server that uses it, so after it.
struct RemovedAtExit {
    fs::path path;
    ~RemovedAtExit() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

// This suite's own MariaDB with TLS and the certificates it serves, made once, gone at exit.
struct TlsMariaDb {
    RemovedAtExit dir{fs::temp_directory_path() / ("lockstep-binlog-tls-" + std::to_string(::getpid()))};
    TlsCertificates certs = make_tls_certificates(dir.path.string());
    LocalServers server{[this] {
        LocalServersOptions o;
        o.redis = false;
        o.use_environment = false;
        o.mysql_tls_cert = certs.server_cert;
        o.mysql_tls_key = certs.server_key;
        o.mysql_tls_ca = certs.ca_file;
        return o;
    }()};
};

TlsMariaDb& tls_mariadb() {
    static TlsMariaDb s;
    return s;
}

// The REQUIRE SSL account, with the server's TLS as `mode` asks.
MysqlOptions follower_account(MysqlTlsMode mode) {
    MysqlOptions o = tls_mariadb().server.mysql_options();
    o.user = "tls_follower";
    o.password = kFollowerPassword;
    o.tls.mode = mode;
    if (mode != MysqlTlsMode::Disabled) o.tls.ca_file = tls_mariadb().certs.ca_file;
    return o;
}

MysqlPool& tls_db() {
    static MysqlPool* pool = [] {
        MysqlPool root(tls_mariadb().server.mysql_options());
        root.execute(std::string("CREATE USER tls_follower@'%' IDENTIFIED BY '") + kFollowerPassword + "' REQUIRE SSL");
        root.execute("GRANT ALL ON *.* TO tls_follower@'%'");
        auto* p = new MysqlPool(follower_account(MysqlTlsMode::VerifyIdentity));
        lockstep::testing::bootstrap_demo_schema(*p);
        return p;
    }();
    return *pool;
}

TEST(BinlogTlsTest, TheFollowerStreamsOverTlsAndDeletesTheKeyOfABypassingUpdate) {
    MysqlPool& db = tls_db();
    RepositoryOptions ro;
    ro.key_prefix = fresh_prefix();
    ro.strategy = std::make_shared<WriteThenDelete>();
    ro.ttl = 60s;
    CachedRepository<Item> repo(item_entity(), db, redis(), ro);
    const std::int64_t id = fresh_id();
    repo.insert(Item{id, "widget", 100, 5});
    ASSERT_EQ(repo.get(id)->price, 100);  // cached now
    const std::string key = repo.key_of(id);

    BinlogInvalidator follower(follower_account(MysqlTlsMode::VerifyIdentity), redis(), products_map(ro.key_prefix),
                               follower_options("tls-" + ro.key_prefix));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    // A write the repository does not see: only the follower can delete the cached entry.
    db.execute("UPDATE products SET price = 200, version = version + 1 WHERE id = ?", {id});
    EXPECT_TRUE(time_until_gone(key, 5s).has_value()) << "the follower did not delete " << key;
    EXPECT_EQ(repo.get(id)->price, 200);
    EXPECT_TRUE(follower.metrics().connected);
    follower.stop();
    db.execute("DELETE FROM products WHERE id = ?", {id});
}

TEST(BinlogTlsTest, TheFollowersConnectionIsRefusedWithoutTlsAndAcceptedWithIt) {
    tls_db();  // the account exists
    EXPECT_THROW(BinlogStream::current_gtid(follower_account(MysqlTlsMode::Disabled)), ConnectionError);
    for (auto mode : {MysqlTlsMode::Required, MysqlTlsMode::VerifyCa, MysqlTlsMode::VerifyIdentity}) {
        MysqlOptions o = follower_account(mode);
        if (mode == MysqlTlsMode::Required) o.tls.ca_file.clear();
        EXPECT_NO_THROW(BinlogStream::current_gtid(o)) << to_string(mode);
    }
}

TEST(BinlogTlsTest, TheFollowerRefusesAServerWithoutTlsInEveryMode) {
    // The other suites' server speaks no TLS; libmariadb alone would fall back to plain text
    // under required and verify_ca.
    if (db().query_one("SHOW VARIABLES LIKE 'have_ssl'")->get<std::string>("Value") == "YES") {
        GTEST_SKIP() << "the shared MariaDB (LOCKSTEP_MYSQL_URL) speaks TLS";
    }
    MysqlOptions o = servers().mysql_options();
    for (auto mode : {MysqlTlsMode::Required, MysqlTlsMode::VerifyCa, MysqlTlsMode::VerifyIdentity}) {
        o.tls.mode = mode;
        o.tls.ca_file = mode == MysqlTlsMode::Required ? "" : tls_mariadb().certs.ca_file;
        try {
            BinlogStream::current_gtid(o);
            ADD_FAILURE() << "tls=" << to_string(mode) << " followed a server without TLS";
        } catch (const ConnectionError& e) {
            EXPECT_NE(std::string(e.what()).find("TLS"), std::string::npos) << e.what();
        }
    }
}

TEST(BinlogTlsTest, AnUnreadableCaFileIsAConfigError) {
    MysqlOptions o = follower_account(MysqlTlsMode::VerifyIdentity);
    o.tls.ca_file = "/nonexistent/ca.pem";
    try {
        BinlogStream::current_gtid(o);
        ADD_FAILURE() << "connected without a CA file";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "tls_ca");
    }
}

}  // namespace
}  // namespace lockstep::test
