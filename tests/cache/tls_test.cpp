// rediss://: commands, scripts, pub/sub and a lock over TLS against a private TLS-only
// redis-server, and every way a TLS connection is refused (a certificate that fails a check, a
// file that cannot be read, a server that speaks the other protocol) as a typed error within the
// connection's timeouts.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_servers.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

using Certificate = LocalServersOptions::TlsServerCertificate;

LocalServersOptions tls_server(Certificate certificate = Certificate::Valid, std::string auth_clients = "optional") {
    LocalServersOptions o;
    o.mysql = false;
    o.use_environment = false;
    o.redis_tls = true;
    o.redis_tls_auth_clients = std::move(auth_clients);
    o.redis_tls_certificate = certificate;
    return o;
}

// Connects (the pool opens its first connection on the first command) and sends one PING.
void ping(const RedisOptions& options) {
    RedisClient client(options);
    client.command({"PING"});
}

// Runs `ping(options)` and returns the error it must throw, of type E.
template <class E>
std::string error_of(const RedisOptions& options) {
    try {
        ping(options);
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong error type: " << e.what();
        return e.what();
    }
    ADD_FAILURE() << "connected, expected a failure";
    return {};
}

class TlsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new LocalServers(tls_server()); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static RedisOptions options() { return server_->redis_options(); }
    static const TlsCertificates& certs() { return server_->redis_tls_certificates(); }
    static LocalServers* server_;
};

LocalServers* TlsTest::server_ = nullptr;

TEST_F(TlsTest, TheServerUrlIsARedissUrlThatParsesBackToTheSameOptions) {
    const std::string url = server_->redis_url();
    EXPECT_EQ(url.rfind("rediss://127.0.0.1:", 0), 0u) << url;
    const RedisOptions parsed = parse_redis_url(url);
    EXPECT_TRUE(parsed.tls.enabled);
    EXPECT_EQ(parsed.tls.ca_file, certs().ca_file);
    EXPECT_EQ(parsed.port, options().port);
}

TEST_F(TlsTest, PingSetAndGetGoThroughTls) {
    // The server has no plain-text port (--port 0): every byte below crossed TLS.
    RedisClient client(parse_redis_url(server_->redis_url()));
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
    client.set("tls:{t}:k", "value");
    EXPECT_EQ(client.get("tls:{t}:k"), "value");
    client.del({"tls:{t}:k"});
}

TEST_F(TlsTest, AValueLargerThanManyTlsRecordsArrivesWhole) {
    // 1 MB: about 64 TLS records of 16 KB, read with many SSL_reads into hiredis's reader.
    RedisClient client(options());
    std::string big(1 << 20, 'x');
    for (std::size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>('a' + i % 26);
    client.set("tls:{t}:big", big);
    EXPECT_EQ(client.get("tls:{t}:big"), big);
    const std::vector<RedisReply> replies =
        client.pipeline({{"GET", "tls:{t}:big"}, {"STRLEN", "tls:{t}:big"}, {"DEL", "tls:{t}:big"}});
    EXPECT_EQ(replies.at(0).str(), big);
    EXPECT_EQ(replies.at(1).integer(), static_cast<long long>(big.size()));
}

TEST_F(TlsTest, ALuaScriptRunsByEvalshaOverTls) {
    RedisClient client(options());
    const RedisScript script("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])");
    EXPECT_EQ(client.eval(script, {"tls:{t}:script"}, {"from lua"}).str(), "from lua");
    // The second call is a plain EVALSHA (the script is cached on the server now).
    EXPECT_EQ(client.eval(script, {"tls:{t}:script"}, {"again"}).str(), "again");
    client.del({"tls:{t}:script"});
}

TEST_F(TlsTest, PubSubDeliversEveryMessageOverTls) {
    RedisClient client(options());
    Inbox inbox;
    auto subscription = client.subscriber().subscribe("tls:{t}:channel", inbox.callback());
    ASSERT_EQ(client.publish("tls:{t}:channel", "first"), 1);
    ASSERT_TRUE(inbox.wait_for(1, 10s));
    // RedisClient's subscriber takes sharded channels (SPUBLISH). A pipeline of 500 reaches the
    // subscriber as a few TLS records in a few segments: what OpenSSL has already taken off the
    // socket must be read without waiting in poll().
    std::vector<std::vector<std::string>> publishes;
    for (int i = 0; i < 500; ++i) publishes.push_back({"SPUBLISH", "tls:{t}:channel", "m" + std::to_string(i)});
    for (const RedisReply& receivers : client.pipeline(publishes)) ASSERT_EQ(receivers.integer(), 1);
    ASSERT_TRUE(inbox.wait_for(501, 10s)) << inbox.messages().size() << " of 501 messages";
    const std::vector<std::string> payloads = inbox.payloads();
    for (int i = 0; i < 500; ++i) EXPECT_EQ(payloads.at(static_cast<std::size_t>(i) + 1), "m" + std::to_string(i));
}

TEST_F(TlsTest, MessagesThatArrivedWhileTheSubscriberWasBusyAreReadWithoutAnotherPoll) {
    // The subscriber's callback holds the first message while ten more are published, one round
    // trip each: ten TLS records wait in the socket. The next recv takes them all (read-ahead)
    // and SSL_read hands out one; the other nine are in OpenSSL, not in the socket, so a
    // subscriber that went back to poll() would wait forever for them.
    RedisClient client(options());
    Inbox inbox;
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    auto deliver = inbox.callback();
    bool first = true;
    auto subscription = client.subscriber().subscribe(
        "tls:{t}:busy", [&, released](std::string_view channel, std::string_view message) {
            if (first) {
                first = false;
                entered.set_value();
                released.wait_for(10s);
            }
            deliver(channel, message);
        });
    ASSERT_EQ(client.publish("tls:{t}:busy", "held"), 1);
    ASSERT_EQ(entered.get_future().wait_for(10s), std::future_status::ready);
    for (int i = 0; i < 10; ++i) ASSERT_EQ(client.publish("tls:{t}:busy", "m" + std::to_string(i)), 1);
    release.set_value();
    ASSERT_TRUE(inbox.wait_for(11, 5s)) << inbox.messages().size() << " of 11 messages";
    EXPECT_EQ(inbox.payloads().back(), "m9");
}

TEST_F(TlsTest, ARedisMutexLocksAndUnlocksOverTls) {
    RedisClient redis_a(options());
    RedisClient redis_b(options());
    LockClientOptions lock_options;
    lock_options.prefix = "tls:";
    RedisLockClient locks_a(redis_a, lock_options);
    RedisLockClient locks_b(redis_b, lock_options);
    RedisMutex a(locks_a, "stock");
    RedisMutex b(locks_b, "stock");
    a.lock();
    EXPECT_FALSE(std::async(std::launch::async, [&] { return b.try_lock(); }).get());
    a.unlock();
    EXPECT_TRUE(std::async(std::launch::async, [&] {
                    const bool taken = b.try_lock();
                    if (taken) b.unlock();
                    return taken;
                }).get());
}

TEST_F(TlsTest, AnIdleTlsConnectionWithOnlySessionTicketsWaitingIsLentAgain) {
    // A TLS 1.3 server sends session tickets after the handshake; a connection that has read
    // nothing since holds them unread. The idle check must take them for what they are.
    RedisOptions o = options();
    o.pool_size = 1;
    o.pool_check_idle_after = 0ms;  // check on every lend
    RedisClient client(o);
    { auto first = client.connection(); }  // opened, returned without a command
    std::this_thread::sleep_for(50ms);     // the tickets have arrived
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
    EXPECT_EQ(client.pool_stats().created, 1u);
    EXPECT_EQ(client.pool_stats().discarded, 0u);
}

TEST_F(TlsTest, AnIdleTlsConnectionTheServerClosedIsReplacedNotLent) {
    RedisOptions o = options();
    o.pool_size = 1;
    o.pool_check_idle_after = 0ms;
    RedisClient client(o);
    const long long id = client.command({"CLIENT", "ID"}).integer();
    RedisClient killer(options());
    // The server closes the socket (close_notify, FIN) before it answers CLIENT KILL.
    EXPECT_EQ(killer.command({"CLIENT", "KILL", "ID", std::to_string(id)}).integer(), 1);
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
    EXPECT_EQ(client.pool_stats().discarded, 1u);
    EXPECT_EQ(client.pool_stats().created, 2u);
}

TEST_F(TlsTest, TheHostNameLocalhostIsCheckedAgainstTheCertificate) {
    RedisOptions o = options();
    o.host = "localhost";  // a name (sent as SNI), not an address
    EXPECT_NO_THROW(ping(o));
}

// ---------------------------------------------------------------------------------------------
// Verification failures: ConfigError naming the cause, never a connection.

TEST_F(TlsTest, ACertificateOfAnUntrustedCaIsAConfigErrorNamingTheCause) {
    RedisOptions o = options();
    o.tls.ca_file = certs().foreign_ca_file;  // the server's CA is not this one
    o.password = "hunter2-secret";
    try {
        ping(o);
        FAIL() << "connected with an untrusted certificate";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "server certificate");
        // Which link of the chain OpenSSL names depends on whether the server sends its CA.
        const std::string what = e.what();
        EXPECT_TRUE(what.find("unable to get local issuer certificate") != std::string::npos ||
                    what.find("self-signed certificate in certificate chain") != std::string::npos)
            << what;
        EXPECT_NE(std::string(e.what()).find("TLS handshake"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("hunter2-secret"), std::string::npos) << e.what();
    }
}

TEST_F(TlsTest, WithoutTlsCaTheSystemStoreIsUsedAndDoesNotTrustAPrivateCa) {
    RedisOptions o = options();
    o.tls.ca_file.clear();
    EXPECT_NE(error_of<ConfigError>(o).find("failed verification"), std::string::npos);
}

TEST(TlsServerCertificateTest, AnExpiredCertificateIsAConfigError) {
    LocalServers server(tls_server(Certificate::Expired));
    EXPECT_NE(error_of<ConfigError>(server.redis_options()).find("certificate has expired"), std::string::npos);
}

TEST(TlsServerCertificateTest, ACertificateForAnotherHostIsAConfigErrorUnderFullVerification) {
    LocalServers server(tls_server(Certificate::WrongHost));
    RedisOptions o = server.redis_options();
    EXPECT_NE(error_of<ConfigError>(o).find("IP address mismatch"), std::string::npos);
    o.host = "localhost";
    EXPECT_NE(error_of<ConfigError>(o).find("hostname mismatch"), std::string::npos);
    // tls_verify=ca checks the chain only; tls_server_name names the host the certificate is for.
    RedisOptions chain_only = server.redis_options();
    chain_only.tls.verify = RedisTlsVerify::Ca;
    EXPECT_NO_THROW(ping(chain_only));
    RedisOptions named = server.redis_options();
    named.tls.server_name = "wrong-host.invalid";
    EXPECT_NO_THROW(ping(named));
}

TEST(TlsServerCertificateTest, VerifyNoneAcceptsACertificateOfAnUntrustedCa) {
    LocalServers server(tls_server(Certificate::ForeignCa));
    RedisOptions o = server.redis_options();
    EXPECT_NE(error_of<ConfigError>(o).find("certificate"), std::string::npos);
    o.tls.verify = RedisTlsVerify::None;
    EXPECT_NO_THROW(ping(o));
}

// ---------------------------------------------------------------------------------------------
// Files that cannot be used: ConfigError naming the option.

TEST_F(TlsTest, AnUnreadableCaFileIsAConfigErrorNamingTlsCa) {
    RedisOptions o = options();
    o.tls.ca_file = certs().dir + "/missing-ca.pem";
    try {
        ping(o);
        FAIL() << "connected";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "tls_ca") << e.what();
    }
}

TEST_F(TlsTest, AnUnreadableClientCertificateOrKeyIsAConfigErrorNamingIt) {
    RedisOptions no_cert = options();
    no_cert.tls.cert_file = certs().dir + "/missing-cert.pem";
    no_cert.tls.key_file = certs().client_key;
    RedisOptions no_key = options();
    no_key.tls.cert_file = certs().client_cert;
    no_key.tls.key_file = certs().dir + "/missing-key.pem";
    RedisOptions other_key = options();
    other_key.tls.cert_file = certs().client_cert;
    other_key.tls.key_file = certs().server_key;  // a key, but not the certificate's
    RedisOptions cert_only = options();
    cert_only.tls.cert_file = certs().client_cert;
    for (const auto& [o, part] : {std::pair{no_cert, "tls_cert"}, std::pair{no_key, "tls_key"},
                                  std::pair{other_key, "tls_key"}, std::pair{cert_only, "tls_key"}}) {
        try {
            ping(o);
            ADD_FAILURE() << "connected; expected a ConfigError naming " << part;
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), part) << e.what();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The other protocol on the other end: a typed connection error naming the TLS handshake, within
// the timeouts.

TEST_F(TlsTest, APlainTextServerOnARedissUrlFailsTheTlsHandshakeWithinTheTimeout) {
    RedisOptions o = servers().redis_options();  // the test binary's plain-text server
    if (o.topology != RedisTopology::Standalone) GTEST_SKIP() << "needs a standalone plain-text Redis";
    o.tls.enabled = true;
    o.tls.ca_file = certs().ca_file;
    o.connect_timeout = 500ms;
    o.socket_timeout = 500ms;
    Stopwatch watch;
    const std::string what = error_of<ConnectionError>(o);
    EXPECT_NE(what.find("TLS handshake"), std::string::npos) << what;
    EXPECT_LT(watch.elapsed(), 3s);
}

TEST_F(TlsTest, ATlsServerOnAPlainRedisUrlIsAConnectionErrorNamingTheTlsHandshake) {
    RedisOptions o = options();
    o.tls = RedisTlsOptions{};  // redis://
    o.connect_timeout = 500ms;
    o.socket_timeout = 500ms;
    Stopwatch watch;
    const std::string what = error_of<ConnectionError>(o);
    EXPECT_NE(what.find("TLS handshake"), std::string::npos) << what;
    EXPECT_LT(watch.elapsed(), 3s);
}

// ---------------------------------------------------------------------------------------------
// A server that requires a client certificate (--tls-auth-clients yes).

TEST(TlsClientCertificateTest, AServerThatRequiresOneAcceptsTheClientCertificateAndRefusesNone) {
    LocalServers server(tls_server(Certificate::Valid, "yes"));
    RedisOptions with_cert = server.redis_options();
    with_cert.tls.cert_file = server.redis_tls_certificates().client_cert;
    with_cert.tls.key_file = server.redis_tls_certificates().client_key;
    RedisClient client(with_cert);
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");

    RedisOptions without = server.redis_options();
    without.socket_timeout = 500ms;
    // The server's alert or its reset, whichever meets the PING first, and the reason.
    const std::string what = error_of<ConnectionError>(without);
    EXPECT_NE(what.find("the server asked for a client certificate and tls_cert is not set"), std::string::npos)
        << what;
}

}  // namespace
}  // namespace lockstep::test
