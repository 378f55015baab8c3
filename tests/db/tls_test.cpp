// TLS between the pool and MariaDB, against a private mariadbd that serves a certificate the test
// chooses (LocalServersOptions::mysql_tls_*, swapped with FLUSH SSL): what each mode verifies,
// that TLS is really in use (Ssl_cipher, an account created REQUIRE SSL), and the typed errors
// of a bad certificate or a bad option.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/db.h"
#include "lockstep/servers/local_servers.h"
#include "lockstep/servers/tls_certificates.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTlsOnlyPassword = "tls-only-secret";
constexpr const char* kX509Password = "x509-secret";

class MysqlTlsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = fs::temp_directory_path() / ("lockstep-mysql-tls-" + std::to_string(::getpid()));
        certs_ = make_tls_certificates(dir_.string());
        fs::copy_file(certs_.server_cert, served_cert(), fs::copy_options::overwrite_existing);
        fs::copy_file(certs_.server_key, served_key(), fs::copy_options::overwrite_existing);
        LocalServersOptions o;
        o.redis = false;
        o.use_environment = false;  // an external server would not serve our certificates
        o.mysql_tls_cert = served_cert();
        o.mysql_tls_key = served_key();
        o.mysql_tls_ca = certs_.ca_file;
        server_ = std::make_unique<LocalServers>(o);
        MysqlPool root(server_->mysql_options());
        root.execute(std::string("CREATE USER tls_only@'%' IDENTIFIED BY '") + kTlsOnlyPassword + "' REQUIRE SSL");
        root.execute("GRANT ALL ON *.* TO tls_only@'%'");
        root.execute(std::string("CREATE USER x509_only@'%' IDENTIFIED BY '") + kX509Password + "' REQUIRE X509");
        root.execute("GRANT ALL ON *.* TO x509_only@'%'");
    }
    static void TearDownTestSuite() {
        server_.reset();
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
    }

    // Every test starts with the good certificate served.
    void SetUp() override { serve(certs_.server_cert, certs_.server_key); }

    // Makes the server present `cert` from its next handshake on.
    static void serve(const std::string& cert, const std::string& key) {
        fs::copy_file(cert, served_cert(), fs::copy_options::overwrite_existing);
        fs::copy_file(key, served_key(), fs::copy_options::overwrite_existing);
        MysqlPool root(server_->mysql_options());
        root.execute("FLUSH SSL");
    }

    static MysqlOptions with_tls(MysqlTlsMode mode, const std::string& ca_file = "") {
        MysqlOptions o = server_->mysql_options();
        o.tls.mode = mode;
        o.tls.ca_file = ca_file;
        o.pool_size = 1;
        return o;
    }

    // The session's cipher ("" on a plain connection): the server's own word that TLS is in use.
    static std::string cipher_of(const MysqlOptions& o) {
        MysqlPool pool(o);
        return pool.query_one("SHOW STATUS LIKE 'Ssl_cipher'")->get<std::string>("Value");
    }

    // The DbError of a connect that must fail.
    static DbError connect_error(const MysqlOptions& o) {
        try {
            cipher_of(o);
        } catch (const DbError& e) {
            return e;
        }
        ADD_FAILURE() << "connected with tls=" << to_string(o.tls.mode);
        return DbError("connected", 0, "00000");
    }

    static std::string served_cert() { return (dir_ / "served-cert.pem").string(); }
    static std::string served_key() { return (dir_ / "served-key.pem").string(); }

    static inline fs::path dir_;
    static inline TlsCertificates certs_;
    static inline std::unique_ptr<LocalServers> server_;
};

// A certificate failure is CR_SSL_CONNECTION_ERROR, named as TLS, and not worth retrying.
void expect_certificate_refused(const DbError& e) {
    EXPECT_EQ(e.code(), 2026) << e.what();
    EXPECT_NE(std::string(e.what()).find("TLS"), std::string::npos) << e.what();
    EXPECT_EQ(e.recovery(), Recovery::GiveUp) << e.what();
}

// The server ending an open TLS connection (KILL, restart) reaches OpenSSL as an unexpected end
// of the stream, which libmariadb reports as 2026 like a certificate failure; on an open
// connection it is the lost connection 2013 says over plain TCP: retry the call on a new one.
TEST_F(MysqlTlsTest, AnOpenTlsConnectionTheServerKillsIsALostConnectionToRetry) {
    MysqlConnection victim(with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file));
    const auto id = victim.query_one("SELECT CONNECTION_ID() AS id")->get<std::int64_t>("id");
    MysqlConnection root(server_->mysql_options());
    root.execute_unprepared("KILL CONNECTION " + std::to_string(id));
    try {
        victim.query_one("SELECT 1 AS one");
        FAIL() << "a killed connection answered";
    } catch (const DbError& e) {
        EXPECT_NE(e.code(), 2026) << e.what();
        EXPECT_EQ(e.recovery(), Recovery::RetryCall) << e.what();
    }
    EXPECT_THROW(victim.query_one("SELECT 1 AS one"), ConnectionError) << "the connection is discarded";
    MysqlPool fresh(with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file));
    EXPECT_EQ(fresh.query_one("SELECT 1 AS one")->get<std::int64_t>("one"), 1) << "a new one works";
}

TEST_F(MysqlTlsTest, AVerifiedQueryRunsOverTlsAndAPlainOneDoesNot) {
    EXPECT_FALSE(cipher_of(with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file)).empty());
    EXPECT_FALSE(cipher_of(with_tls(MysqlTlsMode::VerifyCa, certs_.ca_file)).empty());
    EXPECT_FALSE(cipher_of(with_tls(MysqlTlsMode::Required)).empty());
    EXPECT_EQ(cipher_of(with_tls(MysqlTlsMode::Disabled)), "") << "TLS is off unless asked for";
}

TEST_F(MysqlTlsTest, TheOptionsComeFromTheUrl) {
    MysqlOptions o = parse_mysql_url(server_->mysql_url() + "?tls=verify_identity&tls_ca=" + certs_.ca_file);
    EXPECT_FALSE(cipher_of(o).empty());
}

TEST_F(MysqlTlsTest, AnAccountCreatedRequireSslIsRefusedWithoutTlsAndAcceptedWithIt) {
    MysqlOptions plain = with_tls(MysqlTlsMode::Disabled);
    plain.user = "tls_only";
    plain.password = kTlsOnlyPassword;
    const DbError refused = connect_error(plain);
    EXPECT_EQ(refused.code(), 1045) << refused.what();  // access denied
    EXPECT_EQ(std::string(refused.what()).find(kTlsOnlyPassword), std::string::npos) << refused.what();

    MysqlOptions tls = with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file);
    tls.user = "tls_only";
    tls.password = kTlsOnlyPassword;
    EXPECT_FALSE(cipher_of(tls).empty());
}

TEST_F(MysqlTlsTest, AClientCertificateSatisfiesAnAccountCreatedRequireX509) {
    MysqlOptions o = with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file);
    o.user = "x509_only";
    o.password = kX509Password;
    EXPECT_EQ(connect_error(o).code(), 1045) << "TLS without a client certificate is not enough";
    o.tls.cert_file = certs_.client_cert;
    o.tls.key_file = certs_.client_key;
    EXPECT_FALSE(cipher_of(o).empty());
}

TEST_F(MysqlTlsTest, AServerCertificateFromAnUntrustedCaIsRefused) {
    serve(certs_.foreign_cert, certs_.foreign_key);
    expect_certificate_refused(connect_error(with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file)));
    expect_certificate_refused(connect_error(with_tls(MysqlTlsMode::VerifyCa, certs_.ca_file)));
    // Only verification refuses it: encryption alone still connects.
    EXPECT_FALSE(cipher_of(with_tls(MysqlTlsMode::Required)).empty());
}

TEST_F(MysqlTlsTest, TheGoodServerIsRefusedWhenTheCaFileIsAnotherCa) {
    expect_certificate_refused(connect_error(with_tls(MysqlTlsMode::VerifyCa, certs_.foreign_ca_file)));
}

TEST_F(MysqlTlsTest, AnExpiredServerCertificateIsRefused) {
    serve(certs_.expired_cert, certs_.expired_key);
    expect_certificate_refused(connect_error(with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file)));
    expect_certificate_refused(connect_error(with_tls(MysqlTlsMode::VerifyCa, certs_.ca_file)));
}

TEST_F(MysqlTlsTest, AWrongHostIsRefusedByVerifyIdentityAndAcceptedByVerifyCa) {
    serve(certs_.wrong_host_cert, certs_.wrong_host_key);
    expect_certificate_refused(connect_error(with_tls(MysqlTlsMode::VerifyIdentity, certs_.ca_file)));
    EXPECT_FALSE(cipher_of(with_tls(MysqlTlsMode::VerifyCa, certs_.ca_file)).empty());
}

TEST_F(MysqlTlsTest, EveryModeRefusesAServerWithoutTls) {
    MysqlOptions o = servers().mysql_options();  // the suites' own server: plain TCP only
    {
        MysqlPool probe(o);
        if (probe.query_one("SHOW VARIABLES LIKE 'have_ssl'")->get<std::string>("Value") == "YES") {
            GTEST_SKIP() << "the shared MariaDB (LOCKSTEP_MYSQL_URL) speaks TLS";
        }
    }
    o.pool_size = 1;
    for (auto mode : {MysqlTlsMode::Required, MysqlTlsMode::VerifyCa, MysqlTlsMode::VerifyIdentity}) {
        o.tls.mode = mode;
        o.tls.ca_file = mode == MysqlTlsMode::Required ? "" : certs_.ca_file;
        const DbError e = connect_error(o);
        EXPECT_EQ(e.code(), 2026) << to_string(mode) << ": " << e.what();
        EXPECT_EQ(e.recovery(), Recovery::GiveUp) << e.what();
        std::printf("tls=%s against a plain server: %s\n", std::string(to_string(mode)).c_str(), e.what());
    }
}

// No server is needed for these: the pool checks its options when it is made.
ConfigError config_error(const MysqlTlsOptions& tls) {
    MysqlOptions o;
    o.tls = tls;
    try {
        MysqlPool pool(o);
    } catch (const ConfigError& e) {
        return e;
    }
    ADD_FAILURE() << "the pool accepted tls=" << to_string(tls.mode);
    return ConfigError("none", "none");
}

TEST(MysqlTlsOptionsTest, AnUnreadableCaFileIsAConfigErrorNamingTheOption) {
    const ConfigError e = config_error({.mode = MysqlTlsMode::VerifyIdentity, .ca_file = "/nonexistent/ca.pem"});
    EXPECT_EQ(e.part(), "tls_ca");
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ca.pem"), std::string::npos) << e.what();
}

TEST(MysqlTlsOptionsTest, AnUnreadableClientKeyIsAConfigErrorNamingTheOption) {
    const std::string readable = "/proc/self/status";
    const ConfigError e = config_error(
        {.mode = MysqlTlsMode::Required, .cert_file = readable, .key_file = "/nonexistent/key.pem"});
    EXPECT_EQ(e.part(), "tls_key");
}

TEST(MysqlTlsOptionsTest, CombinationsThatWouldWeakenOrIgnoreTlsAreRefused) {
    EXPECT_EQ(config_error({.mode = MysqlTlsMode::VerifyIdentity}).part(), "tls_ca");
    EXPECT_EQ(config_error({.mode = MysqlTlsMode::VerifyCa}).part(), "tls_ca");
    EXPECT_EQ(config_error({.mode = MysqlTlsMode::Required, .ca_file = "/etc/hostname"}).part(), "tls_ca");
    EXPECT_EQ(config_error({.mode = MysqlTlsMode::Disabled, .ca_file = "/etc/hostname"}).part(), "tls");
    EXPECT_EQ(config_error({.mode = MysqlTlsMode::Required, .cert_file = "/etc/hostname"}).part(), "tls_key");
    EXPECT_EQ(config_error({.mode = MysqlTlsMode::Required, .key_file = "/etc/hostname"}).part(), "tls_cert");
}

}  // namespace
}  // namespace lockstep::test
