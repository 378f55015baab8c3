#include "sql_error.h"

#include "lockstep/core/logging.h"

namespace lockstep::db_detail {

DbError to_db_error(const sql::SQLException& e, std::string_view during) {
    std::string state = e.getSQLState();
    // Connector/C++'s own argument checks carry no SQLState; HY000 is SQL's "general error".
    if (state.empty()) state = "HY000";
    std::string message = e.what();
    if (message.empty()) message = "(no message from the driver)";
    DbError error(std::string(during) + ": " + message, e.getErrorCode(), std::move(state));
    logger()->debug("mysql error: {} (recovery: {})", error.what(), to_string(error.recovery()));
    return error;
}

bool breaks_connection(const DbError& error) noexcept {
    const int code = error.code();
    if (code >= 2000 && code < 3000) return true;  // client-side CR_* errors: lost, gone, out of sync
    switch (code) {
        case 1053:  // ER_SERVER_SHUTDOWN
        case 1152:  // ER_ABORTING_CONNECTION
        case 1184:  // ER_NEW_ABORTING_CONNECTION
        case 1927:  // ER_CONNECTION_KILLED (MariaDB)
            return true;
        default:
            break;
    }
    return error.sql_state().rfind("08", 0) == 0;  // SQLState class 08: connection exception
}

std::string describe_statement(std::string_view verb, std::string_view sql) {
    constexpr std::size_t kMaxShown = 160;
    std::string out(verb);
    out += " '";
    if (sql.size() > kMaxShown) {
        out.append(sql.substr(0, kMaxShown));
        out += "...";
    } else {
        out.append(sql);
    }
    out += "'";
    return out;
}

}  // namespace lockstep::db_detail
