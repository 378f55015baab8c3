#include "lockstep/core/error.h"

namespace lockstep {

std::string_view to_string(Recovery r) noexcept {
    switch (r) {
        case Recovery::RetryCall: return "retry the call";
        case Recovery::RetryTransaction: return "retry the transaction";
        case Recovery::GiveUp: return "give up";
    }
    return "give up";
}

DbError::DbError(const std::string& what, int code, std::string sql_state)
    : Error("database error " + std::to_string(code) + " (SQLState " + sql_state + "): " + what),
      code_(code),
      sql_state_(std::move(sql_state)),
      recovery_(recovery_for(code_, sql_state_)) {}

Recovery DbError::recovery_for(int code, std::string_view sql_state) noexcept {
    switch (code) {
        case 1213:  // ER_LOCK_DEADLOCK: the server rolled the transaction back.
        case 1205:  // ER_LOCK_WAIT_TIMEOUT: the statement (and, by default, only it) failed.
            return Recovery::RetryTransaction;
        case 2002:  // CR_CONNECTION_ERROR
        case 2003:  // CR_CONN_HOST_ERROR
        case 2006:  // CR_SERVER_GONE_ERROR
        case 2013:  // CR_SERVER_LOST
        case 2055:  // CR_SERVER_LOST_EXTENDED
        case 1927:  // ER_CONNECTION_KILLED (MariaDB)
        case 1053:  // ER_SERVER_SHUTDOWN
            return Recovery::RetryCall;
        default:
            break;
    }
    // SQLState class 40 = transaction rollback (serialization failure, deadlock).
    if (sql_state.size() >= 2 && sql_state.substr(0, 2) == "40") return Recovery::RetryTransaction;
    // SQLState class 08 = connection exception.
    if (sql_state.size() >= 2 && sql_state.substr(0, 2) == "08") return Recovery::RetryCall;
    return Recovery::GiveUp;
}

Recovery recovery_of(const std::exception& e) noexcept {
    if (const auto* le = dynamic_cast<const Error*>(&e)) return le->recovery();
    return Recovery::GiveUp;
}

}  // namespace lockstep
