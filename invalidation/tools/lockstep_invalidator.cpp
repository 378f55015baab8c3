// lockstep-invalidator: follows a MariaDB binary log as a replica and deletes the Redis cache
// keys of every changed row of the configured tables (C5, C9; docs/invalidation.md).
//
//   lockstep-invalidator --config invalidator.json [--progress 5] [--metrics-file m.json]
//
// Config (JSON):
//   {
//     "mysql": "mysql://root@127.0.0.1:3306/lockstep",     the primary (binlog source)
//     "redis": "redis://127.0.0.1:6379/0",
//     "name": "orders-service",                             row in lockstep_binlog_position
//     "server_id": 4242,                                    distinct per follower
//     "heartbeat_ms": 250, "read_timeout_ms": 1000, "save_interval_ms": 200,
//     "flush_on_fresh_start": true,
//     "tables": [ {"table": "products", "entity": "product", "prefix": "ls:", "key_column": "id"} ],
//     "outbox": {"bound_ms": 1000, "replay_every_ms": 100}          optional: also replay the
//   }                                                               transactional outbox (C5)
//
// Progress: one JSON line of metrics on stdout every --progress seconds (0: off). SIGINT or
// SIGTERM stop it cleanly (the applied position is saved). Exit 0 on a clean stop, 2 on a bad
// config.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/outbox.h"

namespace {

std::atomic<bool> stop_requested{false};
extern "C" void on_signal(int) { stop_requested = true; }

nlohmann::json to_json(const lockstep::InvalidatorMetrics& m) {
    return {{"events", m.events},
            {"transactions", m.transactions},
            {"rows", m.rows},
            {"keys_deleted", m.keys_deleted},
            {"flushes", m.flushes},
            {"flushed_keys", m.flushed_keys},
            {"statement_events", m.statement_events},
            {"reconnects", m.reconnects},
            {"heartbeats", m.heartbeats},
            {"redis_errors", m.redis_errors},
            {"positions_lost", m.positions_lost},
            {"positions_saved", m.positions_saved},
            {"applied_gtid", m.applied_gtid},
            {"saved_gtid", m.saved_gtid},
            {"seconds_behind", m.seconds_behind},
            {"lag_p50_us", m.lag_p50_us},
            {"lag_p99_us", m.lag_p99_us},
            {"lag_max_us", m.lag_max_us},
            {"connected", m.connected}};
}

struct Config {
    lockstep::MysqlOptions mysql;
    lockstep::RedisOptions redis;
    lockstep::BinlogInvalidatorOptions options;
    std::vector<lockstep::TableBinding> tables;
    std::optional<lockstep::OutboxOptions> outbox;
};

Config read_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw lockstep::ConfigError("--config", "cannot read " + path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw lockstep::ConfigError("--config", path + ": " + e.what());
    }
    Config c;
    try {
        c.mysql = lockstep::parse_mysql_url(j.at("mysql").get<std::string>());
        c.redis = lockstep::parse_redis_url(j.at("redis").get<std::string>());
        c.options.name = j.value("name", c.options.name);
        c.options.server_id = j.value("server_id", c.options.server_id);
        c.options.heartbeat = std::chrono::milliseconds(j.value("heartbeat_ms", c.options.heartbeat.count()));
        c.options.read_timeout = std::chrono::milliseconds(j.value("read_timeout_ms", c.options.read_timeout.count()));
        c.options.save_interval = std::chrono::milliseconds(j.value("save_interval_ms", c.options.save_interval.count()));
        c.options.flush_on_fresh_start = j.value("flush_on_fresh_start", c.options.flush_on_fresh_start);
        for (const auto& t : j.at("tables")) {
            lockstep::TableBinding b;
            b.table = t.at("table").get<std::string>();
            b.entity = t.at("entity").get<std::string>();
            b.database = t.value("database", b.database);
            b.prefix = t.value("prefix", b.prefix);
            b.key_column = t.value("key_column", b.key_column);
            c.tables.push_back(std::move(b));
        }
        if (j.contains("outbox")) {
            lockstep::OutboxOptions o;
            o.bound = std::chrono::milliseconds(j["outbox"].value("bound_ms", o.bound.count()));
            o.replay_every = std::chrono::milliseconds(j["outbox"].value("replay_every_ms", o.replay_every.count()));
            c.outbox = o;
        }
    } catch (const nlohmann::json::exception& e) {
        throw lockstep::ConfigError("--config", path + ": " + e.what());
    }
    if (c.tables.empty()) throw lockstep::ConfigError("--config", "no tables");
    if (c.options.server_id == 0) throw lockstep::ConfigError("server_id", "must not be 0");
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"lockstep-invalidator: deletes the cache keys of every row changed in MariaDB, from its binary log"};
    std::string config_path, metrics_file;
    double progress = 5;
    app.add_option("--config", config_path, "JSON config: servers, follower name and id, tables -> entities")->required();
    app.add_option("--progress", progress, "Seconds between metrics lines on stdout (0: none)")->capture_default_str();
    app.add_option("--metrics-file", metrics_file, "Rewrite this file with the latest metrics (JSON) at every progress tick");
    CLI11_PARSE(app, argc, argv);

    try {
        Config c = read_config(config_path);
        c.options.on_error = [](std::exception_ptr e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                lockstep::logger()->warn("invalidator: {}", ex.what());
            }
        };
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        lockstep::RedisClient redis(c.redis);
        lockstep::BinlogInvalidator follower(c.mysql, redis, lockstep::InvalidationMap(c.tables), c.options);
        follower.start();
        // The outbox replayer (strategies/outbox.h): rows of writers that died after COMMIT.
        std::unique_ptr<lockstep::MysqlPool> outbox_pool;
        std::unique_ptr<lockstep::Outbox> outbox;
        if (c.outbox) {
            outbox_pool = std::make_unique<lockstep::MysqlPool>(c.mysql);
            outbox = std::make_unique<lockstep::Outbox>(*outbox_pool, lockstep::make_redis_entry_store(redis), *c.outbox);
        }
        auto tick = std::chrono::duration<double>(progress > 0 ? progress : 1.0);
        auto next = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(tick);
        while (!stop_requested.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (std::chrono::steady_clock::now() < next) continue;
            next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(tick);
            auto line = to_json(follower.metrics()).dump();
            if (progress > 0) std::cout << line << std::endl;
            if (!metrics_file.empty()) std::ofstream(metrics_file, std::ios::trunc) << line << "\n";
        }
        follower.stop();
        std::cout << to_json(follower.metrics()).dump() << std::endl;
        return 0;
    } catch (const lockstep::ConfigError& e) {
        std::cerr << "lockstep-invalidator: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "lockstep-invalidator: " << e.what() << "\n";
        return 1;
    }
}
