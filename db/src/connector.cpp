#include "connector.h"

#include <mutex>

#include <cppconn/driver.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include "lockstep/core/logging.h"
#include "lockstep/db/mysql_tls.h"
#include "sql_error.h"

namespace lockstep::db_detail {
namespace {

// get_driver_instance() initialises the client library and a static driver on its first call,
// and that first call is not thread-safe: two pools created at once on two threads would race.
sql::Driver* driver() {
    static std::once_flag once;
    static sql::Driver* instance = nullptr;
    std::call_once(once, [] {
        instance =
            translate_sql_errors("load the MySQL driver", [] { return sql::mysql::get_driver_instance(); });
    });
    return instance;
}

constexpr int kTlsConnectionError = 2026;  // CR_SSL_CONNECTION_ERROR, as libmariadb reports it

int whole_seconds(std::chrono::milliseconds d) {
    const auto ms = d.count();
    if (ms <= 0) return 1;
    return static_cast<int>((ms + 999) / 1000);
}

std::string host_for_uri(const std::string& host) {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// Connector/C++ 1.1 hands these to libmariadb: sslCA/sslCert/sslKey become MYSQL_OPT_SSL_CA,
// _CERT and _KEY, sslEnforce asks for TLS, sslVerify is MYSQL_OPT_SSL_VERIFY_SERVER_CERT.
// libmariadb verifies the chain whenever it has a CA file and checks the host name only under
// sslVerify, which is what separates verify_ca from verify_identity (tests/db/tls_test.cpp shows
// each mode against a server with a bad certificate).
void set_tls_properties(const MysqlTlsOptions& tls, sql::ConnectOptionsMap& props) {
    if (tls.mode == MysqlTlsMode::Disabled) return;
    props["sslEnforce"] = true;
    props["sslVerify"] = tls.mode == MysqlTlsMode::VerifyIdentity;
    if (!tls.ca_file.empty()) props["sslCA"] = sql::SQLString(tls.ca_file);
    if (!tls.cert_file.empty()) props["sslCert"] = sql::SQLString(tls.cert_file);
    if (!tls.key_file.empty()) props["sslKey"] = sql::SQLString(tls.key_file);
}

// libmariadb 3.3 refuses a server that does not offer TLS only under sslVerify (verify_identity);
// with required and verify_ca it carries on in plain text, and Connector/C++ 1.1 does not show
// the client's TLS state. So the server is asked: an empty Ssl_cipher is a plain session.
void require_encrypted_session(sql::Connection& conn, const MysqlOptions& o, const std::string& during) {
    if (o.tls.mode != MysqlTlsMode::Required && o.tls.mode != MysqlTlsMode::VerifyCa) return;
    const std::string cipher = translate_sql_errors(during, [&] {
        std::unique_ptr<sql::Statement> statement(conn.createStatement());
        std::unique_ptr<sql::ResultSet> result(statement->executeQuery("SHOW STATUS LIKE 'Ssl_cipher'"));
        return result->next() ? std::string(result->getString("Value")) : std::string();
    });
    if (cipher.empty()) {
        throw DbError(during + ": TLS/SSL error: the server did not negotiate TLS (tls=" +
                          std::string(to_string(o.tls.mode)) + ")",
                      kTlsConnectionError, "HY000");
    }
}

}  // namespace

std::string describe_server(const MysqlOptions& o) {
    return o.user + "@" + host_for_uri(o.host) + ":" + std::to_string(o.port) + "/" + o.database;
}

std::unique_ptr<sql::Connection> open_connection(const MysqlOptions& o) {
    check_mysql_tls(o.tls);
    sql::Driver* d = driver();
    sql::ConnectOptionsMap props;
    props["hostName"] = sql::SQLString("tcp://" + host_for_uri(o.host) + ":" + std::to_string(o.port));
    props["port"] = o.port;
    props["userName"] = sql::SQLString(o.user);
    props["password"] = sql::SQLString(o.password);
    if (!o.database.empty()) props["schema"] = sql::SQLString(o.database);
    props["OPT_CONNECT_TIMEOUT"] = whole_seconds(o.connect_timeout);
    props["OPT_READ_TIMEOUT"] = whole_seconds(o.read_timeout);
    props["OPT_WRITE_TIMEOUT"] = whole_seconds(o.write_timeout);
    // A silent reconnect would drop the session's transaction and locks and carry on as if
    // nothing happened; a lost connection must surface as an error instead.
    props["OPT_RECONNECT"] = false;
    props["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
    // UPDATE reports rows matched, not rows changed (what JDBC does too): a guarded write
    // `... WHERE id=? AND fence < ?` that matched its row has applied, even if it happened to
    // write the values the row already had.
    props["CLIENT_FOUND_ROWS"] = true;
    set_tls_properties(o.tls, props);

    const std::string during = "connect to mysql://" + describe_server(o);
    std::unique_ptr<sql::Connection> conn(translate_sql_errors(during, [&] { return d->connect(props); }));
    if (!conn) throw DbError(during + ": the driver returned no connection", 2000, "HY000");
    require_encrypted_session(*conn, o, during);
    logger()->debug("mysql: connected to {}", describe_server(o));
    return conn;
}

}  // namespace lockstep::db_detail
