#include "connector.h"

#include <mutex>

#include <cppconn/driver.h>
#include <mysql_driver.h>

#include "lockstep/core/logging.h"
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

int whole_seconds(std::chrono::milliseconds d) {
    const auto ms = d.count();
    if (ms <= 0) return 1;
    return static_cast<int>((ms + 999) / 1000);
}

std::string host_for_uri(const std::string& host) {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

std::string describe_server(const MysqlOptions& o) {
    return o.user + "@" + host_for_uri(o.host) + ":" + std::to_string(o.port) + "/" + o.database;
}

std::unique_ptr<sql::Connection> open_connection(const MysqlOptions& o) {
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

    const std::string during = "connect to mysql://" + describe_server(o);
    std::unique_ptr<sql::Connection> conn(translate_sql_errors(during, [&] { return d->connect(props); }));
    if (!conn) throw DbError(during + ": the driver returned no connection", 2000, "HY000");
    logger()->debug("mysql: connected to {}", describe_server(o));
    return conn;
}

}  // namespace lockstep::db_detail
