// The db layer in one include: MysqlPool and its guard, MysqlConnection's statement helpers,
// SqlValue and Row, Transaction, the TLS option checks, and the demo schema bootstrap. See
// docs/db.md.
#pragma once

#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/mysql_tls.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"
#include "lockstep/db/transaction.h"
