#include "sql_error.h"

#include <algorithm>
#include <iterator>
#include <cctype>

#include "lockstep/core/logging.h"

namespace lockstep::db_detail {

// Server messages quote two kinds of thing in single quotes: names (of a key, a column, a table,
// a user or host) and values (a duplicate key's value, a literal that did not convert, the SQL
// near a syntax error). Names help an operator and are kept; values may be a user's e-mail
// address or any other row content and are replaced by '?'. The rule:
//
//   1. A quote opens a name when the word before it is one of kNameWords below, or when it
//      follows '@' ('user'@'host'). Names never contain a quote; each is copied as it is.
//   2. The first quote that does not open a name opens a value. A value may contain quotes
//      itself (an address like o'brien@example.com), so its end is found from the end of the
//      message: the quote before a trailing  for key 'NAME'  or  for column 'NAME' at row N
//      (the only templates with a single-quoted name after a value), else the message's last
//      quote. Everything from the opening quote to that end becomes '?'.
//
// MariaDB 10.11 quotes names after a value with backticks (for column `db`.`t`.`c`), which rule 2
// leaves alone. Checked against these server messages (MariaDB 10.11 and MySQL 8.0 texts):
//   1062/1586 Duplicate entry '%s' for key '%s'               -> Duplicate entry '?' for key 'email'
//   1366 Incorrect %s value: '%s' for column `d`.`t`.`c` at row %lu (MySQL 8: for column '%s')
//   1292 Truncated incorrect %s value: '%s'    1525 Incorrect %s value: '%s'
//   1367 Illegal %s '%s' value found during parsing      1300 Invalid %s character string: '%s'
//   1690 %s value is out of range in '%s'                  1231 Variable '%s' can't be set to the value of '%s'
//   1064 ... near '%s' at line %d (the statement is already in the message, with placeholders)
//   1054 Unknown column '%s' in '%s'    1048 Column '%s' cannot be null
//   1364 Field '%s' doesn't have a default value    1406 Data too long for column '%s' at row %lu
//   1264 Out of range value for column '%s' at row %lu    1265 Data truncated for column '%s' at row %lu
//   1146 Table '%s' doesn't exist    1049 Unknown database '%s'    3819 Check constraint '%s' is violated
//   1045 Access denied for user '%s'@'%s' (using password: YES)    1044 ... to database '%s'
//   2003 Can't connect to MySQL server on '%s' (111)    2013 Lost connection to MySQL server at '%s'
// Not covered: the text of a SIGNAL ... SET MESSAGE_TEXT (1644) is the application's own and is
// passed on as it is.
namespace {

constexpr std::string_view kNameWords[] = {
    "key",    "column", "table",    "database",  "schema", "field",    "index", "constraint", "user",
    "host",   "variable", "procedure", "function", "plugin", "savepoint", "operation", "on", "at"};

bool opens_name(std::string_view m, std::size_t quote) {
    if (quote > 0 && m[quote - 1] == '@') return true;
    std::size_t end = quote;
    while (end > 0 && m[end - 1] == ' ') --end;
    std::size_t begin = end;
    while (begin > 0 && std::isalpha(static_cast<unsigned char>(m[begin - 1]))) --begin;
    std::string word(m.substr(begin, end - begin));
    std::transform(word.begin(), word.end(), word.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return std::find(std::begin(kNameWords), std::end(kNameWords), word) != std::end(kNameWords);
}

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The closing quote of a name quoted at `name_open` that ends a message template: the quote
// before `lead` ("' for key ") when m[..name_open) ends with it and it lies after `open`.
std::string_view::size_type closing_before(std::string_view m, std::size_t open, std::size_t name_open,
                                           std::string_view lead) {
    if (name_open == std::string_view::npos || name_open <= open + lead.size()) return std::string_view::npos;
    if (m.substr(name_open - lead.size(), lead.size()) != lead) return std::string_view::npos;
    return name_open - lead.size();
}

// The quote that closes the value opened at `open` (rule 2), or npos when it is never closed.
std::string_view::size_type value_close(std::string_view m, std::size_t open) {
    constexpr auto npos = std::string_view::npos;
    // ... 'VALUE' for key 'NAME'
    if (m.size() >= 2 && m.back() == '\'') {
        const auto close = closing_before(m, open, m.rfind('\'', m.size() - 2), "' for key ");
        if (close != npos) return close;
    }
    // ... 'VALUE' for column 'NAME' at row N
    if (const auto at_row = m.rfind("' at row "); at_row != npos && at_row > 0 &&
                                                   all_digits(m.substr(at_row + 9))) {
        const auto close = closing_before(m, open, m.rfind('\'', at_row - 1), "' for column ");
        if (close != npos) return close;
    }
    const auto last = m.rfind('\'');
    return last > open ? last : npos;
}

}  // namespace

std::string redact_server_message(std::string_view m) {
    std::string out;
    out.reserve(m.size());
    std::size_t i = 0;
    while (i < m.size()) {
        const auto quote = m.find('\'', i);
        if (quote == std::string_view::npos) break;
        if (opens_name(m, quote)) {
            const auto close = m.find('\'', quote + 1);
            if (close == std::string_view::npos) break;  // unterminated: treated as a value below
            out.append(m.substr(i, close + 1 - i));
            i = close + 1;
            continue;
        }
        out.append(m.substr(i, quote - i));
        out += "'?'";
        const auto close = value_close(m, quote);
        if (close == std::string_view::npos) return out;
        i = close + 1;
        // Everything after the value is names and template text (rule 2 found the value's end).
        out.append(m.substr(i));
        return out;
    }
    if (i < m.size()) {
        const auto quote = m.find('\'', i);
        if (quote == std::string_view::npos) {
            out.append(m.substr(i));
        } else {
            out.append(m.substr(i, quote - i));
            out += "'?'";
        }
    }
    return out;
}

DbError to_db_error(const sql::SQLException& e, std::string_view during) {
    std::string state = e.getSQLState();
    // Connector/C++'s own argument checks carry no SQLState; HY000 is SQL's "general error".
    if (state.empty()) state = "HY000";
    std::string message = redact_server_message(e.what());
    if (message.empty()) message = "(no message from the driver)";
    DbError error(std::string(during) + ": " + message, e.getErrorCode(), std::move(state));
    logger()->debug("mysql error: {} (recovery: {})", error.what(), to_string(error.recovery()));
    return error;
}

DbError to_session_db_error(const sql::SQLException& e, std::string_view during) {
    constexpr int kTlsError = 2026;   // CR_SSL_CONNECTION_ERROR
    constexpr int kServerLost = 2013; // CR_SERVER_LOST
    if (e.getErrorCode() != kTlsError) return to_db_error(e, during);
    std::string message = redact_server_message(e.what());
    DbError error(std::string(during) + ": " + message + " (the TLS session ended: connection lost)", kServerLost,
                  "HY000");
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
