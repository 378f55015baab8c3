#include "lockstep/servers/local_servers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>

#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include "server_process.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/uri.h"

namespace lockstep {

using namespace servers_detail;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const char* kInstallHint = "run scripts/install-deps (it installs redis-server and mariadb-server)";

std::string require_executable(const std::string& name) {
    std::string path = find_executable(name);
    if (path.empty()) throw ConfigError(name, "'" + name + "' not found on PATH; " + kInstallHint);
    return path;
}

// A TCP connection to 127.0.0.1:port is accepted.
bool port_accepts(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

// One PING over a fresh TCP connection, without the cache layer (servers/ depends on core only).
bool redis_answers_ping(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    timeval tv{0, 200 * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        static const char ping[] = "*1\r\n$4\r\nPING\r\n";
        if (::send(fd, ping, sizeof ping - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof ping - 1)) {
            char buf[16] = {};
            ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
            ok = n >= 5 && std::strncmp(buf, "+PONG", 5) == 0;
        }
    }
    ::close(fd);
    return ok;
}

sql::mysql::MySQL_Driver* mysql_driver() {
    // The driver singleton's first creation is not thread-safe.
    static std::once_flag once;
    static sql::mysql::MySQL_Driver* driver = nullptr;
    std::call_once(once, [] { driver = sql::mysql::get_mysql_driver_instance(); });
    return driver;
}

// The options' TLS as Connector/C++ 1.1 takes it (the pool does the same, db/src/connector.cpp),
// so the servers' own checks reach a TLS-only MariaDB (LocalServersOptions::mysql_tls).
void set_tls_properties(const MysqlTlsOptions& tls, sql::ConnectOptionsMap& props) {
    if (tls.mode == MysqlTlsMode::Disabled) return;
    props["sslEnforce"] = true;
    props["sslVerify"] = tls.mode == MysqlTlsMode::VerifyIdentity;
    if (!tls.ca_file.empty()) props["sslCA"] = sql::SQLString(tls.ca_file);
}

// Connects (without a default schema) and runs `SELECT 1`, then creates `database` if asked.
// Returns an empty string on success, else the error.
std::string mysql_check(const MysqlOptions& o, const std::string& create_database) {
    try {
        sql::ConnectOptionsMap props;
        props["hostName"] = "tcp://" + o.host + ":" + std::to_string(o.port);
        props["userName"] = o.user;
        props["password"] = o.password;
        props["OPT_CONNECT_TIMEOUT"] = 1;
        props["OPT_READ_TIMEOUT"] = 5;
        set_tls_properties(o.tls, props);
        std::unique_ptr<sql::Connection> conn(mysql_driver()->connect(props));
        std::unique_ptr<sql::Statement> st(conn->createStatement());
        std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT 1"));
        if (!create_database.empty()) st->execute("CREATE DATABASE IF NOT EXISTS `" + create_database + "`");
        return {};
    } catch (const sql::SQLException& e) {
        return std::string(e.what()) + " (error " + std::to_string(e.getErrorCode()) + ")";
    }
}

// Runs `statements` on one connection (no default schema); the first row's first column of the
// last one as a string when it is a query (empty otherwise). Throws ConnectionError naming the
// statement that failed.
std::string mysql_run(const MysqlOptions& o, const std::vector<std::string>& statements, bool last_is_query = false,
                      int read_timeout_s = 5) {
    try {
        sql::ConnectOptionsMap props;
        props["hostName"] = "tcp://" + o.host + ":" + std::to_string(o.port);
        props["userName"] = o.user;
        props["password"] = o.password;
        props["OPT_CONNECT_TIMEOUT"] = 2;
        props["OPT_READ_TIMEOUT"] = read_timeout_s;
        set_tls_properties(o.tls, props);
        std::unique_ptr<sql::Connection> conn(mysql_driver()->connect(props));
        std::unique_ptr<sql::Statement> st(conn->createStatement());
        for (std::size_t i = 0; i < statements.size(); ++i) {
            if (last_is_query && i + 1 == statements.size()) {
                std::unique_ptr<sql::ResultSet> rs(st->executeQuery(statements[i]));
                return rs->next() ? std::string(rs->getString(1)) : std::string();
            }
            st->execute(statements[i]);
        }
        return {};
    } catch (const sql::SQLException& e) {
        throw ConnectionError("MariaDB on port " + std::to_string(o.port) + ": " + std::string(e.what()) + " (error " +
                              std::to_string(e.getErrorCode()) + ")");
    }
}

}  // namespace

struct LocalServers::Impl {
    LocalServersOptions options;
    fs::path dir;                  // temp dir, empty if nothing is owned
    int reaper_write_fd = -1;      // its EOF tells the reaper we are gone
    pid_t reaper_pid = 0;

    bool redis_owned = false;
    RedisOptions redis;
    TlsCertificates tls;  // options.redis_tls or options.mysql_tls only
    pid_t redis_pid = 0;
    std::string redis_binary;

    bool mysql_owned = false;
    MysqlOptions mysql;
    pid_t mysql_pid = 0;
    std::string mysqld_binary;

    bool replica_owned = false;    // options.mysql_replica: a private replica of the private primary
    MysqlOptions replica;
    pid_t replica_pid = 0;

    void make_dir_and_reaper();
    void start_redis_process();
    void start_mysql_process();
    void install_mysql_datadir(const std::string& name = "mysql");
    void start_replica_process();
    // Polls `SELECT 1` on `o` until it answers (creating `create_database` if not empty).
    void wait_mysql_answers(pid_t& pid, const MysqlOptions& o, const std::string& create_database,
                            const std::string& err_log, const char* what);
    void stop_all() noexcept;
};

void LocalServers::Impl::make_dir_and_reaper() {
    fs::path base;
    try {
        base = fs::temp_directory_path();
    } catch (const fs::filesystem_error&) {
        base = "/tmp";
    }
    std::string tmpl = (base / "lockstep-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
        throw ConfigError("TMPDIR", "cannot create a temp dir under " + base.string() + ": " + std::strerror(errno));
    }
    dir = tmpl;

    // (dash's kill builtin rejects "--", so the group kill and the pid kill are separate calls.)
    // The reaper: a shell that blocks reading a pipe whose only write end we hold (O_CLOEXEC,
    // so no server inherits it). When this process dies for any reason the pipe reaches EOF
    // and the reaper kills every process group whose pid file is in the dir, then removes it.
    // This covers SIGKILL and abort, which no destructor or atexit handler survives, and does
    // not depend on which thread started a server (PR_SET_PDEATHSIG fires when the *thread*
    // that forked exits, which would kill servers started from a short-lived thread).
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw ConnectionError(std::string("pipe2: ") + std::strerror(errno));
    const std::string script =
        "cat >/dev/null; for f in \"$1\"/*.pid; do [ -f \"$f\" ] || continue; p=$(cat \"$f\"); "
        "kill -9 -\"$p\" 2>/dev/null; kill -9 \"$p\" 2>/dev/null; done; rm -rf \"$1\"";
    std::vector<std::string> argv = {"/bin/sh", "-c", script, "lockstep-reaper", dir.string()};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) throw ConnectionError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        ::setsid();  // out of our process group: a Ctrl-C aimed at us must not kill the reaper
        ::dup2(fds[0], 0);
        ::execv(args[0], args.data());
        _exit(127);
    }
    ::close(fds[0]);
    reaper_write_fd = fds[1];
    reaper_pid = pid;
}

void LocalServers::Impl::start_redis_process() {
    // A TLS server listens on its TLS port only: nothing reaches it in plain text.
    std::vector<std::string> argv = {
        redis_binary,
        "--port", options.redis_tls ? "0" : std::to_string(redis.port),
        "--bind", "127.0.0.1",
        "--dir", dir.string(),
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--protected-mode", "no",
        "--logfile", (dir / "redis.log").string(),
    };
    if (options.redis_tls) {
        using Certificate = LocalServersOptions::TlsServerCertificate;
        const TlsCertificates& c = tls;
        const auto [cert, key] = options.redis_tls_certificate == Certificate::Expired   ? std::pair(c.expired_cert, c.expired_key)
                                 : options.redis_tls_certificate == Certificate::WrongHost ? std::pair(c.wrong_host_cert, c.wrong_host_key)
                                 : options.redis_tls_certificate == Certificate::ForeignCa ? std::pair(c.foreign_cert, c.foreign_key)
                                                                                          : std::pair(c.server_cert, c.server_key);
        for (const std::string& arg : {std::string("--tls-port"), std::to_string(redis.port), std::string("--tls-cert-file"),
                                       cert, std::string("--tls-key-file"), key, std::string("--tls-ca-cert-file"),
                                       c.ca_file, std::string("--tls-auth-clients"), options.redis_tls_auth_clients}) {
            argv.push_back(arg);
        }
    }
    argv.insert(argv.end(), options.redis_extra_args.begin(), options.redis_extra_args.end());
    if (!options.redis_config_file.empty()) argv.insert(argv.begin() + 1, options.redis_config_file);
    redis_pid = spawn(argv, (dir / "redis.out").string(), (dir / "redis.pid").string());
    auto deadline = Clock::now() + options.start_timeout;
    // servers/ speaks no TLS: a TLS server counts as up once its port accepts connections
    // (redis-server listens only after it has loaded its certificates).
    while (!(options.redis_tls ? port_accepts(redis.port) : redis_answers_ping(redis.port))) {
        int status = 0;
        if (has_exited(redis_pid, &status)) {
            redis_pid = 0;
            throw ConnectionError("redis-server exited during start-up:" + tail_of((dir / "redis.log").string()) +
                                  tail_of((dir / "redis.out").string()));
        }
        if (Clock::now() > deadline) {
            kill_and_reap(redis_pid);
            redis_pid = 0;
            throw ConnectionError("redis-server did not answer PING on port " + std::to_string(redis.port) +
                                  " within " + std::to_string(options.start_timeout.count()) + " ms");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    logger()->info("private redis-server pid {} on 127.0.0.1:{}", redis_pid, redis.port);
}

namespace {

// The lines of an install log that say what went wrong: mariadb-install-db ends every failure
// with the same generic advice, and the bootstrap server's own [ERROR] lines come before it.
std::string error_lines_of(const std::string& path) {
    std::ifstream in(path);
    std::string line, out;
    int kept = 0;
    while (std::getline(in, line) && kept < 12) {
        if (line.find("ERROR") == std::string::npos && line.find("rror:") == std::string::npos) continue;
        out += "\n  | " + line;
        ++kept;
    }
    return out;
}

}  // namespace

// mariadb-install-db bootstraps a server. Once in a long CI run, on a machine starting several
// at once, it exited 1 with no cause that could be reproduced: it is tried up to three times,
// each on an empty data dir, and the error names the bootstrap's own error lines.
void LocalServers::Impl::install_mysql_datadir(const std::string& name) {
    constexpr int kAttempts = 3;
    std::string install = require_executable(options.mariadb_install_db);
    std::vector<std::string> argv = {
        install, "--no-defaults", "--datadir=" + (dir / name).string(),
        "--auth-root-authentication-method=normal", "--skip-test-db",
    };
    if (::geteuid() == 0) argv.push_back("--user=root");
    const std::string stem = name == "mysql" ? "mariadb-install" : name + "-install";
    const auto log = (dir / (stem + ".log")).string();
    std::string why;
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        fs::remove_all(dir / name);
        pid_t pid = spawn(argv, log, (dir / (stem + ".pid")).string());
        int code = wait_exit(pid, options.start_timeout);
        fs::remove(dir / (stem + ".pid"));
        if (code == 0) return;
        why = (code < 0 ? std::string("timed out") : "exit " + std::to_string(code)) + error_lines_of(log);
        if (code < 0 || attempt == kAttempts) break;  // a timed-out try would wait as long again
        logger()->warn("mariadb-install-db attempt {} of {} failed ({}); trying again on an empty data dir", attempt,
                       kAttempts, why);
    }
    throw ConnectionError("mariadb-install-db failed (" + why + "):" + tail_of(log));
}

void LocalServers::Impl::start_mysql_process() {
    std::vector<std::string> argv = {
        mysqld_binary,
        "--no-defaults",
        "--datadir=" + (dir / "mysql").string(),
        "--socket=" + (dir / "mysql.sock").string(),
        "--pid-file=" + (dir / "mariadbd.pidfile").string(),
        "--log-error=" + (dir / "mariadbd.err").string(),
        "--tmpdir=" + dir.string(),
        "--port=" + std::to_string(mysql.port),
        "--bind-address=127.0.0.1",
        // Row-based binary log with full images and column metadata, so a binlog follower
        // (invalidation/, C5 and C9) sees the primary key of every changed row, whoever wrote it.
        // binlog_row_metadata can only be set at start-up.
        "--log-bin=" + (dir / "mysql" / "binlog").string(),
        "--binlog-format=ROW",
        "--server-id=1",
        "--binlog-row-image=FULL",
        "--binlog-row-metadata=FULL",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=64M",
        // Test and demo data are disposable: do not fsync every commit.
        "--innodb-flush-log-at-trx-commit=2",
        "--max-connections=500",
    };
    if (!options.mysql_tls_cert.empty()) {
        argv.insert(argv.end(), {"--ssl-cert=" + options.mysql_tls_cert, "--ssl-key=" + options.mysql_tls_key});
        if (!options.mysql_tls_ca.empty()) argv.push_back("--ssl-ca=" + options.mysql_tls_ca);
    }
    if (options.mysql_tls) {
        argv.insert(argv.end(), {"--ssl-cert=" + tls.server_cert, "--ssl-key=" + tls.server_key,
                                 "--ssl-ca=" + tls.ca_file, "--require-secure-transport=ON"});
    }
    if (::geteuid() == 0) argv.push_back("--user=root");
    mysql_pid = spawn(argv, (dir / "mariadbd.out").string(), (dir / "mariadbd.pid").string());
    wait_mysql_answers(mysql_pid, mysql, options.database, (dir / "mariadbd.err").string(), "mariadbd");
    logger()->info("private mariadbd pid {} on 127.0.0.1:{}", mysql_pid, mysql.port);
}

void LocalServers::Impl::wait_mysql_answers(pid_t& pid, const MysqlOptions& o, const std::string& create_database,
                                            const std::string& err_log, const char* what) {
    auto deadline = Clock::now() + options.start_timeout;
    std::string last_error;
    for (;;) {
        int status = 0;
        if (has_exited(pid, &status)) {
            pid = 0;
            throw ConnectionError(std::string(what) + " exited during start-up:" + tail_of(err_log));
        }
        last_error = mysql_check(o, create_database);
        if (last_error.empty()) return;
        if (Clock::now() > deadline) {
            kill_and_reap(pid);
            pid = 0;
            throw ConnectionError(std::string(what) + " did not answer SELECT 1 on port " + std::to_string(o.port) +
                                  " within " + std::to_string(options.start_timeout.count()) + " ms: " + last_error);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// C10's replica: a second mariadbd (server id 2) in `<dir>/replica`, replicating everything the
// primary ever logged (GTID from the start: the primary's binlog holds the CREATE DATABASE).
// It logs what it applies with the primary's settings, so a binlog follower pointed at the
// replica sees a change only once the replica has applied it.
void LocalServers::Impl::start_replica_process() {
    std::vector<std::string> argv = {
        mysqld_binary,
        "--no-defaults",
        "--datadir=" + (dir / "replica").string(),
        "--socket=" + (dir / "replica.sock").string(),
        "--pid-file=" + (dir / "replica.pidfile").string(),
        "--log-error=" + (dir / "replica.err").string(),
        "--tmpdir=" + dir.string(),
        "--port=" + std::to_string(replica.port),
        "--bind-address=127.0.0.1",
        "--server-id=2",
        "--log-bin=" + (dir / "replica" / "binlog").string(),
        "--relay-log=" + (dir / "replica" / "relay").string(),
        "--log-slave-updates",
        "--binlog-format=ROW",
        "--binlog-row-image=FULL",
        "--binlog-row-metadata=FULL",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=32M",
        "--innodb-flush-log-at-trx-commit=2",
        "--max-connections=200",
    };
    if (::geteuid() == 0) argv.push_back("--user=root");
    replica_pid = spawn(argv, (dir / "replica.out").string(), (dir / "replica.pid").string());
    wait_mysql_answers(replica_pid, replica, "", (dir / "replica.err").string(), "mariadbd (replica)");
    // MASTER_CONNECT_RETRY=1: after a primary restart (restart_mysql) the replica reconnects
    // within a second instead of the default minute.
    mysql_run(replica, {
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=" + std::to_string(mysql.port) + ", MASTER_USER='" +
            mysql.user + "', MASTER_PASSWORD='" + mysql.password +
            "', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1, MASTER_HEARTBEAT_PERIOD=1",
        "START SLAVE",
    });
    logger()->info("private mariadbd replica pid {} on 127.0.0.1:{}", replica_pid, replica.port);
}

void LocalServers::Impl::stop_all() noexcept {
    kill_and_reap(replica_pid);
    replica_pid = 0;
    kill_and_reap(redis_pid);
    redis_pid = 0;
    kill_and_reap(mysql_pid);
    mysql_pid = 0;
    if (!dir.empty()) {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    if (reaper_write_fd >= 0) {
        ::close(reaper_write_fd);  // the reaper wakes, finds nothing left, exits
        reaper_write_fd = -1;
        wait_exit(reaper_pid, std::chrono::seconds(5));
        reaper_pid = 0;
    }
}

LocalServers::LocalServers(LocalServersOptions options) : impl_(std::make_unique<Impl>()) {
    auto& m = *impl_;
    m.options = std::move(options);
    const char* redis_env = m.options.use_environment ? std::getenv("LOCKSTEP_REDIS_URL") : nullptr;
    const char* mysql_env = m.options.use_environment ? std::getenv("LOCKSTEP_MYSQL_URL") : nullptr;
    if (m.options.redis_tls) {
        if (!m.options.redis) throw ConfigError("redis_tls", "needs .redis = true");
        redis_env = nullptr;  // the TLS server is always a private one
    }
    if (m.options.mysql_tls) {
        if (!m.options.mysql) throw ConfigError("mysql_tls", "needs .mysql = true");
        if (!m.options.mysql_tls_cert.empty()) {
            throw ConfigError("mysql_tls", "set either mysql_tls or mysql_tls_cert/_key/_ca, not both");
        }
        if (m.options.mysql_replica) throw ConfigError("mysql_tls", "a private replica replicates in plain text");
        mysql_env = nullptr;  // the TLS server is always a private one
    }
    if (redis_env && *redis_env) m.redis = parse_redis_url(redis_env);
    if (mysql_env && *mysql_env) {
        m.mysql = parse_mysql_url(mysql_env);
        if (m.options.mysql) {
            std::string err = mysql_check(m.mysql, m.mysql.database);
            if (!err.empty()) throw ConnectionError("LOCKSTEP_MYSQL_URL server is not usable: " + err);
        }
    }
    m.redis_owned = m.options.redis && !(redis_env && *redis_env);
    m.mysql_owned = m.options.mysql && !(mysql_env && *mysql_env);

    // Check every binary before starting anything: one clear line, nothing half-started.
    if (m.redis_owned) m.redis_binary = require_executable(m.options.redis_server);
    if (m.options.mysql_replica && !m.mysql_owned) {
        throw ConfigError("mysql_replica", "a private replica needs a private primary (unset LOCKSTEP_MYSQL_URL, or "
                                           "set use_environment = false)");
    }
    m.replica_owned = m.options.mysql_replica;
    if (m.mysql_owned) {
        m.mysqld_binary = require_executable(m.options.mariadbd);
        require_executable(m.options.mariadb_install_db);
    }
    if (!m.redis_owned && !m.mysql_owned) return;

    try {
        m.make_dir_and_reaper();
        if (m.options.redis_tls || m.options.mysql_tls) m.tls = make_tls_certificates((m.dir / "tls").string());
        if (m.redis_owned) {
            m.redis = RedisOptions{};
            m.redis.port = free_loopback_port();
            if (m.options.redis_tls) {
                m.redis.tls.enabled = true;
                m.redis.tls.ca_file = m.tls.ca_file;
            }
            m.start_redis_process();
        }
        if (m.mysql_owned) {
            m.mysql = MysqlOptions{};
            m.mysql.user = "root";
            m.mysql.port = free_loopback_port();
            if (m.options.mysql_tls) {
                m.mysql.tls.mode = MysqlTlsMode::VerifyIdentity;
                m.mysql.tls.ca_file = m.tls.ca_file;
            }
            m.install_mysql_datadir();
            // The replica starts from a copy of the freshly installed (never started) data dir:
            // the same files mariadb-install-db would write, without its seconds of start-up.
            if (m.replica_owned) fs::copy(m.dir / "mysql", m.dir / "replica", fs::copy_options::recursive);
            m.start_mysql_process();
        }
        if (m.mysql_owned) m.mysql.database = m.options.database;
        if (m.replica_owned) {
            m.replica = m.mysql;
            m.replica.database.clear();  // until the replica has applied the CREATE DATABASE
            m.replica.port = free_loopback_port();
            m.start_replica_process();
            m.replica.database = m.options.database;
            // Caught up before anyone uses it: the database exists on the replica.
            LocalServers::wait_for_replica(m.options.start_timeout);
        }
    } catch (...) {
        m.stop_all();
        throw;
    }
}

LocalServers::~LocalServers() { impl_->stop_all(); }

namespace {

// Every accessor of a server the options turned off throws: there is no server behind it, and a
// URL built from default options would point at whatever happens to listen there.
void require_enabled(bool enabled, const char* server, const char* option) {
    if (!enabled) {
        throw ConfigError(std::string("LocalServers.") + option,
                          std::string("this LocalServers was made with .") + option + " = false: it has no " + server);
    }
}

}  // namespace

std::string LocalServers::redis_url() const {
    require_enabled(impl_->options.redis, "Redis", "redis");
    const auto& r = impl_->redis;
    if (r.topology != RedisTopology::Standalone) return to_url(r);  // an adopted cluster/sentinel URL
    if (r.tls.enabled) return to_url(r);
    std::string url = "redis://";
    if (!r.password.empty()) url += r.user + ":" + r.password + "@";
    return url + r.host + ":" + std::to_string(r.port) + "/" + std::to_string(r.db);
}

std::string LocalServers::mysql_url() const {
    require_enabled(impl_->options.mysql, "MariaDB", "mysql");
    const auto& m = impl_->mysql;
    if (m.tls.mode != MysqlTlsMode::Disabled) return to_url(m);  // with its tls and tls_ca
    std::string url = "mysql://" + m.user;
    if (!m.password.empty()) url += ":" + m.password;
    return url + "@" + m.host + ":" + std::to_string(m.port) + "/" + m.database;
}

RedisOptions LocalServers::redis_options() const {
    require_enabled(impl_->options.redis, "Redis", "redis");
    return impl_->redis;
}

const TlsCertificates& LocalServers::redis_tls_certificates() const {
    require_enabled(impl_->options.redis_tls, "TLS Redis", "redis_tls");
    return impl_->tls;
}
const TlsCertificates& LocalServers::mysql_tls_certificates() const {
    require_enabled(impl_->options.mysql_tls, "TLS MariaDB", "mysql_tls");
    return impl_->tls;
}
MysqlOptions LocalServers::mysql_options() const {
    require_enabled(impl_->options.mysql, "MariaDB", "mysql");
    return impl_->mysql;
}
bool LocalServers::owns_redis() const noexcept { return impl_->redis_owned; }
bool LocalServers::owns_mysql() const noexcept { return impl_->mysql_owned; }
int LocalServers::redis_pid() const noexcept { return impl_->redis_pid; }
int LocalServers::mysql_pid() const noexcept { return impl_->mysql_pid; }

bool LocalServers::has_mysql_replica() const noexcept { return impl_->replica_owned; }
MysqlOptions LocalServers::mysql_replica_options() const { return impl_->replica; }
int LocalServers::mysql_replica_pid() const noexcept { return impl_->replica_pid; }

std::string LocalServers::mysql_replica_url() const {
    const auto& m = impl_->replica;
    std::string url = "mysql://" + m.user;
    if (!m.password.empty()) url += ":" + m.password;
    return url + "@" + m.host + ":" + std::to_string(m.port) + "/" + m.database;
}

void LocalServers::wait_for_replica(std::chrono::milliseconds timeout) const {
    if (!impl_->replica_owned) throw ConfigError("mysql_replica", "LocalServers started no replica");
    auto primary = impl_->mysql;
    primary.database.clear();
    auto replica = impl_->replica;
    replica.database.clear();
    const std::string pos = mysql_run(primary, {"SELECT @@gtid_binlog_pos"}, true);
    const long long seconds = std::max<long long>(1, (timeout.count() + 999) / 1000);
    // MASTER_GTID_WAIT: 0 once the replica applied `pos`, -1 on timeout.
    const std::string waited = mysql_run(
        replica, {"SELECT MASTER_GTID_WAIT('" + pos + "', " + std::to_string(seconds) + ")"}, true,
        static_cast<int>(seconds) + 5);
    if (waited != "0") {
        throw TimeoutError("the replica did not apply the primary's position " + pos + " within " +
                           std::to_string(timeout.count()) + " ms (is its SQL thread stopped?)");
    }
}

void LocalServers::kill_redis() {
    require_enabled(impl_->options.redis, "Redis", "redis");
    if (!impl_->redis_owned) throw ConfigError("LocalServers", "cannot kill an external Redis (LOCKSTEP_REDIS_URL)");
    kill_and_reap(impl_->redis_pid);
    impl_->redis_pid = 0;
}

void LocalServers::kill_mysql() {
    require_enabled(impl_->options.mysql, "MariaDB", "mysql");
    if (!impl_->mysql_owned) throw ConfigError("LocalServers", "cannot kill an external MySQL (LOCKSTEP_MYSQL_URL)");
    kill_and_reap(impl_->mysql_pid);
    impl_->mysql_pid = 0;
}

void LocalServers::start_redis() {
    require_enabled(impl_->options.redis, "Redis", "redis");
    if (!impl_->redis_owned) throw ConfigError("LocalServers", "cannot start an external Redis (LOCKSTEP_REDIS_URL)");
    if (impl_->redis_pid != 0) return;
    impl_->start_redis_process();
}

void LocalServers::start_mysql() {
    require_enabled(impl_->options.mysql, "MariaDB", "mysql");
    if (!impl_->mysql_owned) throw ConfigError("LocalServers", "cannot start an external MySQL (LOCKSTEP_MYSQL_URL)");
    if (impl_->mysql_pid != 0) return;
    impl_->start_mysql_process();
}

void LocalServers::restart_redis() {
    kill_redis();
    start_redis();
}

void LocalServers::restart_mysql() {
    kill_mysql();
    start_mysql();
}

}  // namespace lockstep
