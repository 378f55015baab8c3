// LocalServers against the real binaries: start, answer, kill, restart, clean up, and clean up
// even when the owning process is SIGKILLed.
#include "lockstep/servers/local_servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include "eventually.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/db.h"
#include "lockstep/servers/child_process.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// Child role: start LocalServers, report "<dir-of-redis> <redis pid> <mysql pid>" on stdout, then
// wait to be killed. Runs before gtest's main when the environment asks for it.
const bool g_child_role_handled = [] {
    if (!std::getenv("LOCKSTEP_TEST_ROLE") || std::string(std::getenv("LOCKSTEP_TEST_ROLE")) != "servers-owner") {
        return false;
    }
    ::unsetenv("LOCKSTEP_REDIS_URL");
    ::unsetenv("LOCKSTEP_MYSQL_URL");
    lockstep::LocalServers servers;
    std::string line = std::to_string(servers.redis_pid()) + " " + std::to_string(servers.mysql_pid()) + "\n";
    (void)!::write(1, line.data(), line.size());
    for (;;) ::pause();
}();

bool redis_ping(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        const char ping[] = "*1\r\n$4\r\nPING\r\n";
        (void)!::send(fd, ping, sizeof ping - 1, MSG_NOSIGNAL);
        char buf[8] = {};
        ok = ::recv(fd, buf, 5, 0) == 5 && std::strncmp(buf, "+PONG", 5) == 0;
    }
    ::close(fd);
    return ok;
}

long long mysql_select_one(const lockstep::MysqlOptions& o) {
    sql::ConnectOptionsMap props;
    props["hostName"] = "tcp://" + o.host + ":" + std::to_string(o.port);
    props["userName"] = o.user;
    props["password"] = o.password;
    props["schema"] = o.database;
    props["OPT_CONNECT_TIMEOUT"] = 2;
    std::unique_ptr<sql::Connection> c(sql::mysql::get_mysql_driver_instance()->connect(props));
    std::unique_ptr<sql::Statement> st(c->createStatement());
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT 1"));
    rs->next();
    return rs->getInt64(1);
}

bool process_alive(int pid) { return pid > 0 && ::kill(pid, 0) == 0; }

lockstep::LocalServersOptions private_only() {
    lockstep::LocalServersOptions o;
    o.use_environment = false;
    return o;
}

}  // namespace

TEST(LocalServers, StartsBothServersThatAnswerAndStopsThemOnDestruction) {
    int redis_pid = 0, mysql_pid = 0;
    {
        lockstep::LocalServers servers(private_only());
        ASSERT_TRUE(servers.owns_redis());
        ASSERT_TRUE(servers.owns_mysql());
        redis_pid = servers.redis_pid();
        mysql_pid = servers.mysql_pid();
        EXPECT_TRUE(redis_ping(servers.redis_options().port));
        EXPECT_EQ(mysql_select_one(servers.mysql_options()), 1);
        // The URLs are what clients parse: they must round-trip.
        EXPECT_EQ(lockstep::parse_redis_url(servers.redis_url()).port, servers.redis_options().port);
        EXPECT_EQ(lockstep::parse_mysql_url(servers.mysql_url()).database, "lockstep");
    }
    EXPECT_FALSE(process_alive(redis_pid));
    EXPECT_FALSE(process_alive(mysql_pid));
}

TEST(LocalServers, KilledRedisIsGoneUntilStartedAgainOnTheSamePort) {
    lockstep::LocalServersOptions o = private_only();
    o.mysql = false;
    lockstep::LocalServers servers(o);
    const int port = servers.redis_options().port;
    servers.kill_redis();
    EXPECT_EQ(servers.redis_pid(), 0);
    EXPECT_FALSE(redis_ping(port));
    servers.start_redis();
    EXPECT_EQ(servers.redis_options().port, port);
    EXPECT_TRUE(redis_ping(port));
    servers.restart_redis();
    EXPECT_TRUE(redis_ping(port));
}

// A server the options turned off has no URL, options, or lifecycle: a typed error, never a URL
// for a server that was never started.
TEST(LocalServers, AccessorsOfADisabledServerAreConfigErrors) {
    lockstep::LocalServersOptions o = private_only();
    o.mysql = false;
    lockstep::LocalServers servers(o);
    EXPECT_NO_THROW(servers.redis_url());
    EXPECT_THROW(servers.mysql_url(), lockstep::ConfigError);
    EXPECT_THROW(servers.mysql_options(), lockstep::ConfigError);
    EXPECT_THROW(servers.kill_mysql(), lockstep::ConfigError);
    EXPECT_THROW(servers.start_mysql(), lockstep::ConfigError);
    EXPECT_THROW(servers.restart_mysql(), lockstep::ConfigError);
    EXPECT_EQ(servers.mysql_pid(), 0);
    try {
        servers.mysql_url();
    } catch (const lockstep::ConfigError& e) {
        EXPECT_EQ(e.part(), "LocalServers.mysql");
    }
    lockstep::LocalServersOptions none = private_only();
    none.redis = false;
    none.mysql = false;
    lockstep::LocalServers nothing(none);
    EXPECT_THROW(nothing.redis_url(), lockstep::ConfigError);
    EXPECT_THROW(nothing.redis_options(), lockstep::ConfigError);
    EXPECT_THROW(nothing.kill_redis(), lockstep::ConfigError);
    EXPECT_THROW(nothing.restart_redis(), lockstep::ConfigError);
}

// mariadb-install-db that fails: a script in its place prints an error line and exits 1 for the
// first `failures` calls (counted in a file beside it), then runs the real one.
std::string failing_install_db(const std::filesystem::path& dir, int failures) {
    const auto script = dir / "install-db";
    {
        std::FILE* f = std::fopen(script.c_str(), "w");
        std::fprintf(f,
                     "#!/bin/sh\n"
                     "echo x >> '%s/calls'\n"
                     "if [ $(wc -l < '%s/calls') -le %d ]; then echo '[ERROR] forced bootstrap failure'; exit 1; fi\n"
                     "exec mariadb-install-db \"$@\"\n",
                     dir.c_str(), dir.c_str(), failures);
        std::fclose(f);
    }
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    return script.string();
}

int calls_of(const std::filesystem::path& dir) {
    std::FILE* f = std::fopen((dir / "calls").c_str(), "r");
    if (!f) return 0;
    int lines = 0;
    for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) lines += c == '\n';
    std::fclose(f);
    return lines;
}

// A private MariaDB alone, whose mariadb-install-db is failing_install_db(dir, failures).
lockstep::LocalServersOptions mariadb_with_failing_install(const std::filesystem::path& dir, int failures) {
    std::filesystem::create_directories(dir);
    lockstep::LocalServersOptions o = private_only();
    o.redis = false;
    o.mariadb_install_db = failing_install_db(dir, failures);
    return o;
}

TEST(LocalServers, AnInstallThatFailsOnceIsTriedAgainOnAnEmptyDataDir) {
    const auto dir = std::filesystem::path(::testing::TempDir()) / ("install-once-" + std::to_string(::getpid()));
    const lockstep::LocalServersOptions o = mariadb_with_failing_install(dir, 1);
    {
        lockstep::LocalServers servers(o);
        EXPECT_EQ(mysql_select_one(servers.mysql_options()), 1);
    }
    EXPECT_EQ(calls_of(dir), 2);
    std::filesystem::remove_all(dir);
}

TEST(LocalServers, AnInstallThatKeepsFailingNamesTheBootstrapsErrorLine) {
    const auto dir = std::filesystem::path(::testing::TempDir()) / ("install-never-" + std::to_string(::getpid()));
    const lockstep::LocalServersOptions o = mariadb_with_failing_install(dir, 100);
    try {
        lockstep::LocalServers servers(o);
        ADD_FAILURE() << "a failing install started a server";
    } catch (const lockstep::ConnectionError& e) {
        EXPECT_NE(std::string(e.what()).find("[ERROR] forced bootstrap failure"), std::string::npos) << e.what();
    }
    EXPECT_EQ(calls_of(dir), 3);
    std::filesystem::remove_all(dir);
}

// mysql_tls: the private MariaDB speaks verified TLS only, its URL and options say so, and it
// stays TLS-only across a restart.
TEST(LocalServers, ATlsMariadbAnswersOnlyOverVerifiedTlsAndItsUrlSaysSo) {
    lockstep::LocalServersOptions o = private_only();
    o.redis = false;
    o.mysql_tls = true;
    lockstep::LocalServers servers(o);
    const lockstep::MysqlOptions mo = servers.mysql_options();
    EXPECT_EQ(mo.tls.mode, lockstep::MysqlTlsMode::VerifyIdentity);
    EXPECT_EQ(mo.tls.ca_file, servers.mysql_tls_certificates().ca_file);
    const lockstep::MysqlOptions from_url = lockstep::parse_mysql_url(servers.mysql_url());
    EXPECT_EQ(from_url.tls.mode, lockstep::MysqlTlsMode::VerifyIdentity) << servers.mysql_url();
    EXPECT_EQ(from_url.tls.ca_file, mo.tls.ca_file);
    EXPECT_EQ(from_url.port, mo.port);
    auto cipher = [&] {
        lockstep::MysqlPool pool(from_url);
        return pool.query_one("SHOW STATUS LIKE 'Ssl_cipher'")->get<std::string>("Value");
    };
    EXPECT_FALSE(cipher().empty());
    EXPECT_THROW(mysql_select_one(mo), sql::SQLException) << "a plain connection is refused";
    servers.restart_mysql();
    EXPECT_FALSE(cipher().empty());
    EXPECT_THROW(mysql_select_one(mo), sql::SQLException) << "still refused after a restart";
}

TEST(LocalServers, MysqlTlsIsAConfigErrorWithAReplicaOrAServerCertificateOfItsOwn) {
    lockstep::LocalServersOptions with_replica = private_only();
    with_replica.redis = false;
    with_replica.mysql_tls = true;
    with_replica.mysql_replica = true;
    EXPECT_THROW(lockstep::LocalServers{with_replica}, lockstep::ConfigError);
    lockstep::LocalServersOptions with_cert = private_only();
    with_cert.redis = false;
    with_cert.mysql_tls = true;
    with_cert.mysql_tls_cert = "/nonexistent/cert.pem";
    EXPECT_THROW(lockstep::LocalServers{with_cert}, lockstep::ConfigError);
}

TEST(LocalServers, RestartedMariadbKeepsItsData) {
    lockstep::LocalServersOptions o = private_only();
    o.redis = false;
    lockstep::LocalServers servers(o);
    {
        auto mo = servers.mysql_options();
        sql::ConnectOptionsMap props;
        props["hostName"] = "tcp://127.0.0.1:" + std::to_string(mo.port);
        props["userName"] = mo.user;
        props["schema"] = mo.database;
        std::unique_ptr<sql::Connection> c(sql::mysql::get_mysql_driver_instance()->connect(props));
        std::unique_ptr<sql::Statement> st(c->createStatement());
        st->execute("CREATE TABLE kept (id INT PRIMARY KEY) ENGINE=InnoDB");
        st->execute("INSERT INTO kept VALUES (7)");
    }
    servers.restart_mysql();
    auto mo = servers.mysql_options();
    sql::ConnectOptionsMap props;
    props["hostName"] = "tcp://127.0.0.1:" + std::to_string(mo.port);
    props["userName"] = mo.user;
    props["schema"] = mo.database;
    std::unique_ptr<sql::Connection> c(sql::mysql::get_mysql_driver_instance()->connect(props));
    std::unique_ptr<sql::Statement> st(c->createStatement());
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT id FROM kept"));
    ASSERT_TRUE(rs->next());
    EXPECT_EQ(rs->getInt(1), 7);
}

TEST(LocalServers, MissingBinaryIsAOneLineConfigErrorNamingInstallDeps) {
    lockstep::LocalServersOptions o = private_only();
    o.redis_server = "no-such-redis-server-binary";
    try {
        lockstep::LocalServers servers(o);
        FAIL() << "expected ConfigError";
    } catch (const lockstep::ConfigError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("scripts/install-deps"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_EQ(e.part(), "no-such-redis-server-binary");
    }
}

TEST(LocalServers, EnvironmentUrlsAreUsedAndNotOwned) {
    lockstep::LocalServersOptions first_options = private_only();
    first_options.mysql = false;
    lockstep::LocalServers first(first_options);
    ::setenv("LOCKSTEP_REDIS_URL", first.redis_url().c_str(), 1);
    lockstep::LocalServersOptions o;
    o.mysql = false;
    lockstep::LocalServers adopted(o);
    ::unsetenv("LOCKSTEP_REDIS_URL");
    EXPECT_FALSE(adopted.owns_redis());
    EXPECT_EQ(adopted.redis_options().port, first.redis_options().port);
    EXPECT_EQ(adopted.redis_pid(), 0);
    EXPECT_THROW(adopted.kill_redis(), lockstep::ConfigError);
    EXPECT_THROW(adopted.restart_redis(), lockstep::ConfigError);
}

TEST(LocalServers, MalformedEnvironmentUrlIsAConfigError) {
    ::setenv("LOCKSTEP_REDIS_URL", "redis://localhost:notaport", 1);
    lockstep::LocalServersOptions o;
    o.mysql = false;
    EXPECT_THROW(lockstep::LocalServers servers(o), lockstep::ConfigError);
    ::unsetenv("LOCKSTEP_REDIS_URL");
}

// The owner is SIGKILLed: no destructor runs. The reaper must still kill both servers and
// remove the temp dir.
TEST(LocalServers, ServersDieAndTempDirGoesWhenTheOwnerIsKilled) {
    // The child's TMPDIR is a directory of this test alone: other ctest entries running at the
    // same time (scripts/test runs ctest -j) make and remove their own lockstep-* dirs in the
    // shared TMPDIR, so counting there would count theirs.
    const fs::path tmp = fs::temp_directory_path() / ("owner-killed-" + std::to_string(::getpid()));
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    auto lockstep_dirs = [&] {
        int n = 0;
        for (const auto& e : fs::directory_iterator(tmp)) {
            if (e.path().filename().string().rfind("lockstep-", 0) == 0) ++n;
        }
        return n;
    };
    const int dirs_before = lockstep_dirs();

    lockstep::testing::ChildProcess owner({"test_servers"},
                                          {{"LOCKSTEP_TEST_ROLE", "servers-owner"}, {"TMPDIR", tmp.string()}});
    // Both servers start before the line comes (mariadbd's first start is the slow part).
    const std::optional<std::string> line = owner.read_line(120s);
    ASSERT_TRUE(line) << "the owner never reported its servers";
    int redis_pid = 0, mysql_pid = 0;
    ASSERT_EQ(std::sscanf(line->c_str(), "%d %d", &redis_pid, &mysql_pid), 2) << "child said: " << *line;
    ASSERT_TRUE(process_alive(redis_pid));
    ASSERT_TRUE(process_alive(mysql_pid));
    EXPECT_EQ(lockstep_dirs(), dirs_before + 1);

    owner.signal(SIGKILL);
    owner.wait();
    lockstep::test::eventually(
        [&] { return !process_alive(redis_pid) && !process_alive(mysql_pid) && lockstep_dirs() <= dirs_before; }, 10s,
        20ms);  // the checks below say which one is left
    EXPECT_FALSE(process_alive(redis_pid));
    EXPECT_FALSE(process_alive(mysql_pid));
    EXPECT_EQ(lockstep_dirs(), dirs_before);
    std::error_code ec;
    fs::remove_all(tmp, ec);
}
