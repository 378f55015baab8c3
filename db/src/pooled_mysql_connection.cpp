#include "lockstep/db/pooled_mysql_connection.h"

#include "pool_core.h"

namespace lockstep {

PooledMysqlConnection& PooledMysqlConnection::operator=(PooledMysqlConnection&& other) noexcept {
    if (this != &other) {
        give_back();
        pool_ = std::move(other.pool_);
        conn_ = std::move(other.conn_);
    }
    return *this;
}

PooledMysqlConnection::~PooledMysqlConnection() {
    give_back();
}

void PooledMysqlConnection::give_back() noexcept {
    if (conn_ && pool_) pool_->give_back(std::move(conn_));
    conn_.reset();
    pool_.reset();
}

}  // namespace lockstep
