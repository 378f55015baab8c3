// Internal to the db layer: opening one Connector/C++ connection from MysqlOptions.
#pragma once

#include <memory>

#include <cppconn/connection.h>

#include "lockstep/core/mysql_options.h"

namespace lockstep::db_detail {

// Connects and returns an open session in autocommit mode, or throws the DbError of the
// failure (bad credentials: 1045; nothing listening: 2002/2003; timeout: 2013 ...).
//
// libmariadb takes its connect/read/write timeouts in whole seconds, so the millisecond
// options are rounded up (never down to 0, which would mean "no timeout").
std::unique_ptr<sql::Connection> open_connection(const MysqlOptions& options);

// "root@127.0.0.1:3306/lockstep": names a server in messages, without the password.
std::string describe_server(const MysqlOptions& options);

}  // namespace lockstep::db_detail
