// Internal to the db layer: the one place where Connector/C++ exceptions become lockstep errors.
// Every call into cppconn goes through `translate_sql_errors`, so no sql::SQLException ever
// leaves the db layer and every DbError keeps the server's error code and SQLState.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <cppconn/exception.h>

#include "lockstep/core/error.h"

namespace lockstep::db_detail {

// The DbError for `e`. `during` says what lockstep was doing ("connect to 127.0.0.1:3306",
// "execute UPDATE products ..."); it is prefixed to the server's message, which is redacted
// first (redact_server_message).
DbError to_db_error(const sql::SQLException& e, std::string_view during);

// The same for a statement on an open session, where a TLS error (2026, CR_SSL_CONNECTION_ERROR)
// is the encrypted stream ending -- OpenSSL's "unexpected eof while reading" when the server
// closed or KILLed the session -- and so becomes 2013 (CR_SERVER_LOST), what plain TCP reports
// for the same loss: RetryCall on a new session. At connect a 2026 stays (a certificate that
// fails the check is not retried).
DbError to_session_db_error(const sql::SQLException& e, std::string_view during);

// `message` (a MySQL/MariaDB error text) with every quoted value replaced by '?': identifiers
// (key, column, table, user, host names) are kept, row values and literals are not. The rule and
// the server messages it was checked against are in sql_error.cpp.
std::string redact_server_message(std::string_view message);

// True when a connection that raised `error` can no longer be trusted and must be closed rather
// than reused: the client lost or desynchronised its session (CR_* codes 2000-2999, SQLState
// class 08) or the server ended it (shutdown, KILL CONNECTION). Server errors such as a
// duplicate key, a deadlock or a lock-wait timeout leave the session usable.
bool breaks_connection(const DbError& error) noexcept;

// "execute " + the statement, cut to a readable length. Parameter values are never included:
// they may be secrets.
std::string describe_statement(std::string_view verb, std::string_view sql);

// Runs `f`; a sql::SQLException it throws leaves as the matching DbError.
template <class F>
decltype(auto) translate_sql_errors(std::string_view during, F&& f) {
    try {
        return std::forward<F>(f)();
    } catch (const sql::SQLException& e) {
        throw to_db_error(e, during);
    }
}

}  // namespace lockstep::db_detail
