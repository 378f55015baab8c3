// The seeds' "close unpaid orders" job with lockstep: every node starts the same runner; each
// slot runs on one node, and its effects commit once (docs/jobs.md). Tables: orders(id,
// product_id, qty, status, created_at), products(id, stock).
#pragma once

#include <memory>

#include "lockstep/coordination/job_runner.h"
#include "lockstep/db/transaction.h"

inline std::unique_ptr<lockstep::JobRunner> close_unpaid_orders(lockstep::JobLock& lock, lockstep::MysqlPool& db) {
    return std::make_unique<lockstep::JobRunner>(lock, [&db](lockstep::JobContext& run) {
        lockstep::Transaction tx(db);
        run.record_run(tx);  // a second run of this slot fails here, and nothing below commits
        for (const auto& o : tx.query("SELECT id, product_id, qty FROM orders WHERE status = 'unpaid' "
                                      "AND created_at < UTC_TIMESTAMP() - INTERVAL 30 MINUTE FOR UPDATE")) {
            tx.execute("UPDATE products SET stock = stock + ? WHERE id = ?", {o.get<std::int64_t>("qty"), o.get<std::int64_t>("product_id")});
            tx.execute("UPDATE orders SET status = 'closed' WHERE id = ?", {o.get<std::int64_t>("id")});
        }
        tx.commit();
    });
}
