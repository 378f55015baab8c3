// LocalServers: a private redis-server and a private mariadbd for the demo and the tests.
//
// Without LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL in the environment it starts each server in a
// fresh temp dir (under $TMPDIR, named lockstep-XXXXXX) on a free loopback port, waits until it
// answers (PING; SELECT 1) within `start_timeout`, and creates the database. The destructor stops
// both and removes the temp dir. If this process dies without running the destructor (SIGKILL,
// abort), a small reaper process started alongside notices (its pipe from us reaches EOF) and
// kills the servers and removes the dir, so nothing is ever left running.
//
// With a URL set, that server is used as it is and is not owned: kill/restart then throw
// ConfigError (tests that need them skip).
//
// Thread safety: construct and destroy on one thread; the accessors may be called from any
// thread; kill/start/restart must not race with each other.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/mysql_options.h"
#include "lockstep/core/redis_options.h"
#include "lockstep/servers/tls_certificates.h"

namespace lockstep {

struct LocalServersOptions {
    bool redis = true;  // start (or adopt) a Redis server
    bool mysql = true;  // start (or adopt) a MariaDB server
    // Whether LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL are honoured.
    bool use_environment = true;
    // Database created in the private MariaDB (and expected in an external one).
    std::string database = "lockstep";
    // Executables, looked up on PATH and then in /usr/sbin and /usr/local/sbin.
    std::string redis_server = "redis-server";
    std::string mariadbd = "mariadbd";
    std::string mariadb_install_db = "mariadb-install-db";
    // Deadline for each server to answer after it is started.
    std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
    // More redis-server arguments (e.g. "--cluster-enabled", "yes"), used by the topologies of
    // local_redis_cluster.h, which are built from one LocalServers per node.
    std::vector<std::string> redis_extra_args;
    // A config file given to redis-server before every other argument (Sentinel needs one it
    // can rewrite). Empty: none.
    std::string redis_config_file;
    // Also start a private MariaDB replica (server id 2, its own temp dir and port) replicating
    // from the private primary with GTID (`MASTER_USE_GTID=slave_pos`), for the read-replica
    // race C10. Needs an owned MariaDB (ConfigError when LOCKSTEP_MYSQL_URL is used). The replica
    // logs what it applies (`log_slave_updates`, ROW, FULL images and metadata), so a binlog
    // follower can follow the replica too.
    bool mysql_replica = false;
    // TLS for the private MariaDB (not the replica): PEM files passed as --ssl-cert, --ssl-key
    // and --ssl-ca (the CA that signs client certificates; may be empty), e.g. from
    // make_tls_certificates (tls_certificates.h). Plain connections stay allowed; an empty
    // mysql_tls_cert means no TLS. The server reads the files again on `FLUSH SSL`, so a test may
    // replace them in between.
    std::string mysql_tls_cert, mysql_tls_key, mysql_tls_ca;
    // Serve the private MariaDB over TLS only (`--require-secure-transport`), with certificates
    // from make_tls_certificates (tls_certificates.h) in the temp dir (the same ones as
    // redis_tls): mysql_url() and mysql_options() then carry tls=verify_identity with that CA, and
    // a plain connection is refused. Needs an owned MariaDB (LOCKSTEP_MYSQL_URL is ignored when
    // set); not with mysql_tls_cert (one way to give the server a certificate) nor with
    // mysql_replica (the replica connects in plain text).
    bool mysql_tls = false;
    // Serve the private Redis over TLS only (`--port 0 --tls-port P`), with certificates from
    // make_tls_certificates (tls_certificates.h) in the temp dir: redis_url() is then
    // rediss://127.0.0.1:P/0?tls_ca=<the CA>. Needs an owned Redis (LOCKSTEP_REDIS_URL is ignored
    // when set; use_environment has no say over it).
    bool redis_tls = false;
    // With redis_tls: whether the server asks for a client certificate: "no", "optional" (asks,
    // accepts none) or "yes" (refuses a client without one) -- redis-server's --tls-auth-clients.
    std::string redis_tls_auth_clients = "optional";
    // With redis_tls: which certificate the server presents (tests of the client's checks).
    enum class TlsServerCertificate { Valid, Expired, WrongHost, ForeignCa };
    TlsServerCertificate redis_tls_certificate = TlsServerCertificate::Valid;
};

class LocalServers {
public:
    // Starts what the options ask for. Throws ConfigError naming scripts/install-deps when a
    // server binary is missing, ConnectionError when a server does not come up in time.
    explicit LocalServers(LocalServersOptions options = {});
    ~LocalServers();
    LocalServers(const LocalServers&) = delete;
    LocalServers& operator=(const LocalServers&) = delete;

    // URLs and parsed options of the servers in use (private or external). Each accessor of a
    // server the options turned off (.redis = false, .mysql = false) throws ConfigError, as do
    // kill/start/restart of it: there is no server behind it.
    std::string redis_url() const;
    std::string mysql_url() const;
    RedisOptions redis_options() const;
    MysqlOptions mysql_options() const;
    // The certificates of a TLS Redis (options.redis_tls); ConfigError without one.
    const TlsCertificates& redis_tls_certificates() const;
    // The certificates of a TLS MariaDB (options.mysql_tls; the same files as the Redis's when
    // both are on); ConfigError without one.
    const TlsCertificates& mysql_tls_certificates() const;

    // True when this object started the server (and so may kill or restart it).
    bool owns_redis() const noexcept;
    bool owns_mysql() const noexcept;

    // SIGKILL the server and wait until it is gone (its data survives in the temp dir).
    void kill_redis();
    void kill_mysql();
    // Start it again on the same port and data dir, and wait until it answers.
    void start_redis();
    void start_mysql();
    // kill + start.
    void restart_redis();
    void restart_mysql();
    // Process ids (0 when not running or not owned), e.g. for SIGSTOP in tests.
    int redis_pid() const noexcept;
    int mysql_pid() const noexcept;

    // The replica (options.mysql_replica): same user and database as the primary. pid 0 when
    // there is none. `wait_for_replica` blocks until the replica has applied everything the
    // primary had committed when it was called (MASTER_GTID_WAIT), or throws TimeoutError;
    // it is what a test calls before it stops the replica's SQL thread on purpose.
    bool has_mysql_replica() const noexcept;
    std::string mysql_replica_url() const;
    MysqlOptions mysql_replica_options() const;
    int mysql_replica_pid() const noexcept;
    void wait_for_replica(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
