// Internal to the db layer: moving SqlValues into a prepared statement's placeholders and result
// rows out of a Connector/C++ result set. Callers wrap these in translate_sql_errors.
#pragma once

#include <string_view>
#include <vector>

#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"

namespace lockstep::db_detail {

// Binds params[i] to placeholder i+1. Throws ConfigError when the number of parameters differs
// from the number of '?' in the statement (Connector/C++ would only say "value not set").
void bind_params(sql::PreparedStatement& statement, const SqlParams& params, std::string_view sql);

// Number of columns the prepared statement will return (0 for INSERT/UPDATE/DDL). Known after
// PREPARE, without running the statement.
unsigned int result_column_count(sql::PreparedStatement& statement);

// Copies every row out of `result`: integers as int64 (an unsigned BIGINT above INT64_MAX is a
// ProtocolError, never a wrapped negative), FLOAT/DOUBLE as double, all else as bytes.
std::vector<Row> read_rows(sql::ResultSet& result);

}  // namespace lockstep::db_detail
