#include "lockstep/db/mysql_pool.h"

#include <chrono>
#include <utility>

#include "connector.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/db/mysql_tls.h"
#include "pool_core.h"

namespace lockstep {

using Clock = std::chrono::steady_clock;

namespace db_detail {

void PoolCore::give_back(std::unique_ptr<MysqlConnection> conn) noexcept {
    if (!conn) return;
    if (conn->in_transaction()) {
        // Only a Transaction that outlived the guard it borrowed from gets here. Closing the
        // session makes the server roll the transaction back; lending it on would not.
        logger()->warn("mysql: a connection came back to the pool inside a transaction; closing it");
        conn->discard();
    }
    {
        MutexLock lock(mutex);
        if (conn->reusable() && !closed) {
            idle.push_back(std::move(conn));
            available.notify_one();
            return;
        }
    }
    drop(std::move(conn));
}

void PoolCore::drop(std::unique_ptr<MysqlConnection> conn) noexcept {
    conn.reset();  // closes it, without holding the lock
    MutexLock lock(mutex);
    --open;
    ++counters.discarded;
    available.notify_one();
}

}  // namespace db_detail

MysqlPool::MysqlPool(MysqlOptions options) {
    if (options.pool_size == 0) throw ConfigError("pool_size", "must be at least 1");
    check_mysql_tls(options.tls);  // at construction, not at the first lazy connect
    core_ = std::make_shared<db_detail::PoolCore>(std::move(options));
    core_->server = db_detail::describe_server(core_->options);
}

MysqlPool::~MysqlPool() {
    std::vector<std::unique_ptr<MysqlConnection>> idle;
    {
        MutexLock lock(core_->mutex);
        core_->closed = true;
        idle.swap(core_->idle);
        core_->open -= idle.size();
        core_->available.notify_all();
    }
    // `idle` closes them here, outside the lock.
}

std::unique_ptr<MysqlConnection> MysqlPool::open_new() {
    try {
        auto conn = std::make_unique<MysqlConnection>(core_->options);
        MutexLock lock(core_->mutex);
        ++core_->counters.created;
        return conn;
    } catch (...) {
        MutexLock lock(core_->mutex);
        --core_->open;  // give the reserved slot back, so the next caller may try again
        core_->available.notify_one();
        throw;
    }
}

PooledMysqlConnection MysqlPool::acquire() {
    auto& core = *core_;
    const auto wait = core.options.pool_wait_timeout;
    const auto deadline = Clock::now() + wait;
    for (;;) {
        std::unique_ptr<MysqlConnection> conn;
        {
            MutexLock lock(core.mutex);
            bool ready = !core.idle.empty() || core.open < core.options.pool_size;
            while (!ready) {
                const bool timed_out = core.available.wait_until(core.mutex, deadline) == std::cv_status::timeout;
                ready = !core.idle.empty() || core.open < core.options.pool_size;
                if (timed_out) break;
            }
            if (!ready) {
                ++core.counters.wait_timeouts;
                const std::size_t size = core.options.pool_size;
                lock.unlock();
                logger()->warn("mysql: no pooled connection to {} free within {} ms (all {} lent)",
                               core.server, wait.count(), size);
                throw TimeoutError("no pooled MySQL connection to " + core.server + " became free within " +
                                   std::to_string(wait.count()) + " ms (pool_size " + std::to_string(size) +
                                   ", all lent)");
            }
            if (!core.idle.empty()) {
                // Most recently returned first: it is the likeliest to be alive and warm, and
                // lets the others age into validation instead of all being kept barely used.
                conn = std::move(core.idle.back());
                core.idle.pop_back();
            } else {
                ++core.open;  // reserve the slot; the connect happens outside the lock
            }
        }
        if (!conn) return PooledMysqlConnection(core_, open_new());

        if (Clock::now() - conn->last_used() >= core.options.validation_interval) {
            const bool alive = conn->ping();
            {
                MutexLock lock(core.mutex);
                ++core.counters.validations;
                if (!alive) ++core.counters.validation_failures;
            }
            if (!alive) {
                logger()->info("mysql: an idle connection to {} failed its ping; replacing it", core.server);
                core.drop(std::move(conn));
                continue;  // the next idle one, or a new connection in the freed slot
            }
        }
        return PooledMysqlConnection(core_, std::move(conn));
    }
}

std::uint64_t MysqlPool::execute(std::string_view sql, const SqlParams& params) {
    return acquire()->execute(sql, params);
}

std::vector<Row> MysqlPool::query(std::string_view sql, const SqlParams& params) {
    return acquire()->query(sql, params);
}

std::optional<Row> MysqlPool::query_one(std::string_view sql, const SqlParams& params) {
    return acquire()->query_one(sql, params);
}

MysqlPoolStats MysqlPool::stats() const {
    MutexLock lock(core_->mutex);
    MysqlPoolStats s = core_->counters;
    s.open = core_->open;
    s.idle = core_->idle.size();
    return s;
}

const MysqlOptions& MysqlPool::options() const noexcept {
    return core_->options;
}

}  // namespace lockstep
