// lockstep-invalidator: follows a MariaDB binary log as a replica and deletes the Redis cache
// keys of every changed row of the configured tables (C5, C9; docs/invalidation.md).
//
//   lockstep-invalidator --config invalidator.json [--progress 5] [--metrics-file m.json]
//                        [--inspect [--inspect-sample-rate 0.01]] [--ha [--lock URL]]
//                        [--metrics-port 9465 [--metrics-bind 0.0.0.0]]
//
// Config (JSON):
//   {
//     "mysql": "mysql://root@127.0.0.1:3306/lockstep",     the primary (binlog source)
//     "failover": ["mysql://root@127.0.0.1:3307/lockstep"], optional: servers that may become
//                                                           the primary (GTID replicas)
//     "redis": "redis://127.0.0.1:6379/0",
//     "name": "orders-service",                             row in lockstep_binlog_position
//     "server_id": 4242,                                    distinct per follower
//     "heartbeat_ms": 250, "read_timeout_ms": 1000, "save_interval_ms": 200,
//     "seek_timeout_ms": 60000,                             the server's silent search for the
//                                                           start position after a (re)connect
//     "flush_on_fresh_start": true,
//     "second_delete_delay_ms": 50, "second_delete_batch_ms": 5,      0: no second DEL
//     "tables": [ {"table": "products", "entity": "product", "prefix": "ls:", "key_column": "id"} ],
//     "outbox": {"bound_ms": 1000, "replay_every_ms": 100},         optional: also replay the
//                                                                   transactional outbox (C5)
//     "inspector": {"server_id": 4343, "sample_rate": 0.01,         optional (or --inspect):
//                   "check_after_ms": 1000, "track_for_ms": 120000} the consistency inspector
//     "ha": {"enabled": true, "lock": "redis://127.0.0.1:6379/0",   optional (or --ha): one
//            "lease_ms": 3000, "latch": "invalidator/<name>"}       active instance of several
//   }
//
// --ha: run N instances with the same config (each its own server_id). Each campaigns for a
// leader latch (coordination/leader_latch.h) on the lock service of the "lock" URL (default: the
// "redis" URL); only the leader follows, with its epoch fencing every position write; a standby
// takes over within the lease after the leader dies, from the stored position.
//
// Progress: one JSON line of metrics on stdout every --progress seconds (0: off): the follower's
// metrics, "elapsed_s", and with the inspector an "inspector" object (stale entries found, per
// million checked writes, staleness percentiles). --metrics-port serves the same as Prometheus
// metrics on /metrics and a health answer on /health (docs/invalidator.md). SIGINT or SIGTERM stop it cleanly (the settled
// position is saved) and print a last line with "final": true. Exit 0 on a clean stop, 2 on a
// bad config.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lockstep/cache/redis_client.h"
#include "lockstep/coordination/leader_latch.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/invalidation/consistency_inspector.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/outbox.h"

#ifdef LOCKSTEP_INVALIDATOR_WITH_PROMETHEUS
#include <prometheus/exposer.h>

#include "lockstep/exporters/prometheus_collector.h"
#endif

namespace {

std::atomic<bool> stop_requested{false};
extern "C" void on_signal(int) { stop_requested = true; }

nlohmann::json to_json(const lockstep::InvalidatorMetrics& m) {
    return {{"events", m.events},
            {"transactions", m.transactions},
            {"rows", m.rows},
            {"keys_deleted", m.keys_deleted},
            {"delete_pipelines", m.delete_pipelines},
            {"delete_batches", m.delete_batches},
            {"second_keys_deleted", m.second_keys_deleted},
            {"second_batches", m.second_batches},
            {"second_pending", m.second_pending},
            {"flushes", m.flushes},
            {"flushed_keys", m.flushed_keys},
            {"statement_events", m.statement_events},
            {"reconnects", m.reconnects},
            {"heartbeats", m.heartbeats},
            {"last_seek_ms", m.last_seek_ms},
            {"redis_errors", m.redis_errors},
            {"positions_lost", m.positions_lost},
            {"positions_saved", m.positions_saved},
            {"positions_refused", m.positions_refused},
            {"fenced_out", m.fenced_out},
            {"source_switches", m.source_switches},
            {"failover_gap_ms", m.failover_gap_ms},
            {"source", m.source},
            {"start_gtid", m.start_gtid},
            {"applied_gtid", m.applied_gtid},
            {"saved_gtid", m.saved_gtid},
            {"seconds_behind", m.seconds_behind},
            {"lag_p50_us", m.lag_p50_us},
            {"lag_p99_us", m.lag_p99_us},
            {"lag_max_us", m.lag_max_us},
            {"connected", m.connected}};
}

nlohmann::json to_json(const lockstep::InspectorMetrics& m) {
    return {{"rows_seen", m.rows_seen},
            {"sampled", m.sampled},
            {"checked", m.checked},
            {"stale", m.stale},
            {"stale_open", m.stale_open},
            {"stale_given_up", m.stale_given_up},
            {"stale_per_million", m.stale_per_million},
            {"staleness_p50_ms", m.staleness_p50_ms},
            {"staleness_p99_ms", m.staleness_p99_ms},
            {"staleness_max_ms", m.staleness_max_ms},
            {"check_errors", m.check_errors},
            {"reconnects", m.reconnects},
            {"connected", m.connected}};
}

#ifdef LOCKSTEP_INVALIDATOR_WITH_PROMETHEUS
// GET /health: 200 while the process serves, with whether each binlog stream is connected (a
// readiness probe reads `lockstep_invalidator_connected ... 1`).
class HealthCollectable : public prometheus::Collectable {
public:
    HealthCollectable(std::string name, std::function<bool()> follower, std::function<bool()> inspector)
        : name_(std::move(name)), follower_(std::move(follower)), inspector_(std::move(inspector)) {}
    std::vector<prometheus::MetricFamily> Collect() const override {
        std::vector<prometheus::MetricFamily> out;
        const auto gauge = [&](const char* family, const char* label, bool value) {
            prometheus::ClientMetric metric;
            metric.label = {{label, name_}};
            metric.gauge.value = value ? 1 : 0;
            out.push_back({family, "1 while the binlog connection is up", prometheus::MetricType::Gauge, {metric}});
        };
        gauge("lockstep_invalidator_connected", "invalidator", follower_());
        if (inspector_) gauge("lockstep_inspector_connected", "inspector", inspector_());
        return out;
    }

private:
    std::string name_;
    std::function<bool()> follower_, inspector_;
};
#endif

struct Config {
    lockstep::MysqlOptions mysql;
    lockstep::RedisOptions redis;
    lockstep::BinlogInvalidatorOptions options;
    std::vector<lockstep::TableBinding> tables;
    std::optional<lockstep::OutboxOptions> outbox;
    std::optional<lockstep::InspectorOptions> inspector;
    bool ha = false;
    std::string lock_url;
    std::chrono::milliseconds lease{3000};
    std::string latch;
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
        c.lock_url = j.at("redis").get<std::string>();
        if (j.contains("failover")) {
            for (const auto& u : j.at("failover")) c.options.failover_sources.push_back(lockstep::parse_mysql_url(u.get<std::string>()));
        }
        if (j.contains("ha")) {
            const auto& h = j.at("ha");
            c.ha = h.value("enabled", true);
            c.lock_url = h.value("lock", c.lock_url);
            c.lease = std::chrono::milliseconds(h.value("lease_ms", c.lease.count()));
            c.latch = h.value("latch", c.latch);
        }
        c.options.name = j.value("name", c.options.name);
        c.options.server_id = j.value("server_id", c.options.server_id);
        c.options.heartbeat = std::chrono::milliseconds(j.value("heartbeat_ms", c.options.heartbeat.count()));
        c.options.read_timeout = std::chrono::milliseconds(j.value("read_timeout_ms", c.options.read_timeout.count()));
        c.options.seek_timeout = std::chrono::milliseconds(j.value("seek_timeout_ms", c.options.seek_timeout.count()));
        c.options.save_interval = std::chrono::milliseconds(j.value("save_interval_ms", c.options.save_interval.count()));
        c.options.flush_on_fresh_start = j.value("flush_on_fresh_start", c.options.flush_on_fresh_start);
        c.options.second_delete_delay =
            std::chrono::milliseconds(j.value("second_delete_delay_ms", c.options.second_delete_delay.count()));
        c.options.second_delete_batch =
            std::chrono::milliseconds(j.value("second_delete_batch_ms", c.options.second_delete_batch.count()));
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
        if (j.contains("inspector")) {
            const auto& ji = j["inspector"];
            lockstep::InspectorOptions o;
            o.server_id = ji.value("server_id", c.options.server_id + 1);
            o.version_column = ji.value("version_column", o.version_column);
            o.sample_rate = ji.value("sample_rate", o.sample_rate);
            o.check_after = std::chrono::milliseconds(ji.value("check_after_ms", o.check_after.count()));
            o.track_for = std::chrono::milliseconds(ji.value("track_for_ms", o.track_for.count()));
            c.inspector = o;
        }
    } catch (const nlohmann::json::exception& e) {
        throw lockstep::ConfigError("--config", path + ": " + e.what());
    }
    if (c.tables.empty()) throw lockstep::ConfigError("--config", "no tables");
    if (c.latch.empty()) c.latch = "invalidator/" + c.options.name;
    if (c.lease.count() <= 0) throw lockstep::ConfigError("ha.lease_ms", "must be positive");
    if (c.options.server_id == 0) throw lockstep::ConfigError("server_id", "must not be 0");
    if (c.options.second_delete_delay.count() < 0 || c.options.second_delete_batch.count() < 0) {
        throw lockstep::ConfigError("second_delete_delay_ms", "must not be negative");
    }
    if (c.inspector && (c.inspector->server_id == 0 || c.inspector->server_id == c.options.server_id)) {
        throw lockstep::ConfigError("inspector.server_id", "must be non-zero and differ from the follower's server_id");
    }
    return c;
}

// The command line's settings (the rest is in the config file).
struct CommandLine {
    std::string config_path, metrics_file, metrics_bind = "127.0.0.1";
    int metrics_port = -1;
    double progress = 5;
    bool inspect = false;
    double inspect_sample_rate = 0;
    bool ha = false;
    std::string lock_url;
};

constexpr const char* kDescription =
    "lockstep-invalidator: follows a MariaDB binary log as a replica and deletes the Redis cache keys of every\n"
    "row changed in the configured tables, whoever changed it (C5, C9; docs/invalidation.md). Each key is\n"
    "deleted at once and a second time second_delete_delay_ms later (MariaDB's visibility window). The\n"
    "position (GTID) is saved in lockstep_binlog_position after the deletes it covers: a restart resumes\n"
    "there, nothing is skipped.";

void add_options(CLI::App& app, CommandLine& cl) {
    app.footer(
        "Config (JSON): {\"mysql\": \"mysql://root@127.0.0.1:3306/db\", \"redis\": \"redis://127.0.0.1:6379/0\",\n"
        "  \"name\": \"catalog\", \"server_id\": 4242 (distinct per follower),\n"
        "  \"tables\": [{\"table\": \"products\", \"entity\": \"product\", \"prefix\": \"ls:\", \"key_column\": \"id\"}],\n"
        "  optional: heartbeat_ms, read_timeout_ms, seek_timeout_ms (60000), save_interval_ms, flush_on_fresh_start,\n"
        "  second_delete_delay_ms (50; 0 = off), second_delete_batch_ms (5),\n"
        "  \"outbox\": {bound_ms, replay_every_ms}  also replay the transactional outbox,\n"
        "  \"inspector\": {server_id, sample_rate, check_after_ms, track_for_ms}  also run the inspector,\n"
        "  \"failover\": [mysql URLs]  servers that may become the primary: followed by GTID after a failover,\n"
        "  \"ha\": {enabled, lock (URL, default the redis one), lease_ms (3000), latch (name)}}\n"
        "\n"
        "Output: one JSON line every --progress seconds: the follower's counters (events, transactions,\n"
        "keys_deleted, delete_pipelines (first-DEL round trips), delete_batches, second_keys_deleted, flushes,\n"
        "reconnects, redis_errors, applied/saved GTID, start_gtid, positions_lost (flushed: position gone),\n"
        "positions_refused / fenced_out (a newer leader's epoch), source / source_switches / failover_gap_ms),\n"
        "\"active\" (following now),\n"
        "lag_p50_us/lag_p99_us (first event received -> DEL landed), seconds_behind, last_seek_ms (the server's\n"
        "seek to the position at the last connect), elapsed_s; with the\n"
        "inspector an \"inspector\" object: checked, stale, stale_open, stale_per_million (stale entries per\n"
        "million checked writes), staleness_p50_ms/p99_ms/max_ms. SIGINT/SIGTERM: stop, save, print a last\n"
        "line with \"final\": true. With --ha an \"ha\" object: leader, epoch, terms. Exit 0 on a clean stop,\n"
        "2 on a bad config, 1 on another error.");
    app.add_option("--config", cl.config_path, "JSON config: servers, follower name and id, tables -> entities")->required();
    app.add_option("--progress", cl.progress, "Seconds between metrics lines on stdout (0: none)")->capture_default_str();
    app.add_option("--metrics-file", cl.metrics_file, "Rewrite this file with the latest metrics (JSON) at every progress tick");
    app.add_flag("--inspect", cl.inspect,
                 "Also run the consistency inspector (its own replica, server_id = the follower's + 1 unless the "
                 "config's \"inspector\" sets it): samples changed rows, reads the cache check_after_ms later, counts "
                 "entries older than the committed row and how long they stay stale");
    app.add_option("--inspect-sample-rate", cl.inspect_sample_rate, "Fraction of changed rows the inspector checks, in (0, 1] "
                   "(default 1, or the config's)");
    app.add_flag("--ha", cl.ha,
                 "Run as one of N instances (same config, distinct server_id): a leader latch elects one active "
                 "instance; its position writes are fenced by its epoch; a standby takes over within the lease");
    app.add_option("--lock", cl.lock_url, "With --ha: the lock service URL the latch runs on (redis://, mysql://, "
                   "zookeeper://, ...; default the config's ha.lock, else its redis URL)");
    app.add_option("--metrics-port", cl.metrics_port,
                   "Serve Prometheus metrics on GET /metrics and a health answer on GET /health at this TCP port "
                   "(0: any free port, printed on stderr; default: off)")
        ->check(CLI::Range(0, 65535));
    app.add_option("--metrics-bind", cl.metrics_bind, "Address the metrics port listens on")->capture_default_str();
}

// The config file, with the command line's overrides.
Config load_config(const CommandLine& cl) {
    Config c = read_config(cl.config_path);
    if (cl.inspect && !c.inspector) {
        c.inspector = lockstep::InspectorOptions{};
        c.inspector->server_id = c.options.server_id + 1;
    }
    if (c.inspector && cl.inspect_sample_rate > 0) c.inspector->sample_rate = cl.inspect_sample_rate;
    c.options.on_error = [](std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            lockstep::logger()->warn("invalidator: {}", ex.what());
        }
    };
    if (cl.ha) c.ha = true;
    if (!cl.lock_url.empty()) c.lock_url = cl.lock_url;
    return c;
}

// One term of activity: the follower (fenced by `epoch` when > 0), the inspector and the outbox
// replayer. Without --ha a single term runs until the stop.
struct Term {
    std::unique_ptr<lockstep::BinlogInvalidator> follower;
    std::unique_ptr<lockstep::ConsistencyInspector> inspector;
    std::unique_ptr<lockstep::MysqlPool> outbox_pool;
    std::unique_ptr<lockstep::Outbox> outbox;
    void stop() {
        outbox.reset();
        if (inspector) inspector->stop();
        if (follower) follower->stop();
    }
};

// The running process: its terms, its leader latch (--ha) and its metrics port. term_ and
// last_metrics_ are written by the main thread only, under term_mu_ (the metrics port's scrapes
// read them under it). Members are destroyed in reverse order: the metrics port stops before
// the term it reads, the term before the latch.
class Invalidator {
public:
    explicit Invalidator(Config c) : c_(std::move(c)), redis_(c_.redis) {}

    // Until SIGINT/SIGTERM; prints the last line. Returns the exit code.
    int run(const CommandLine& cl) {
        if (c_.ha) {
            locks_ = lockstep::open_lock_service(c_.lock_url);
            new_latch();
        }
        serve_metrics(cl);
        started_ = std::chrono::steady_clock::now();
        if (!c_.ha) {
            auto first = begin_term(0);
            std::lock_guard g(term_mu_);
            term_ = std::move(first);
        }
        follow(cl);
        if (term_) term_->stop();
        std::cout << snapshot(true) << std::endl;
        {
            std::lock_guard g(term_mu_);
            term_.reset();
        }
        if (latch_) latch_->close();
        return 0;
    }

private:
    std::unique_ptr<Term> begin_term(std::int64_t epoch) {
        auto t = std::make_unique<Term>();
        auto options = c_.options;
        options.fence_token = epoch;
        t->follower = std::make_unique<lockstep::BinlogInvalidator>(c_.mysql, redis_, lockstep::InvalidationMap(c_.tables),
                                                                   options);
        t->follower->start();
        // The inspector (consistency_inspector.h): a replica of its own that deletes nothing.
        if (c_.inspector) {
            t->inspector = std::make_unique<lockstep::ConsistencyInspector>(c_.mysql, redis_,
                                                                           lockstep::InvalidationMap(c_.tables), *c_.inspector);
            t->inspector->start();
        }
        // The outbox replayer (strategies/outbox.h): rows of writers that died after COMMIT.
        if (c_.outbox) {
            t->outbox_pool = std::make_unique<lockstep::MysqlPool>(c_.mysql);
            t->outbox = std::make_unique<lockstep::Outbox>(*t->outbox_pool, lockstep::make_redis_entry_store(redis_),
                                                           *c_.outbox);
        }
        return t;
    }

    void new_latch() {
        lockstep::LeaderLatchOptions lo;
        lo.lock.lease = c_.lease;
        lo.on_elected = [](lockstep::FenceToken epoch) { lockstep::logger()->info("invalidator: elected, epoch {}", epoch); };
        lo.on_revoked = [](const lockstep::Revocation& r) {
            lockstep::logger()->warn("invalidator: term {} ended ({}{}{})", r.epoch, lockstep::to_string(r.reason),
                                     r.message.empty() ? "" : ": ", r.message);
        };
        latch_ = std::make_unique<lockstep::LeaderLatch>(*locks_, c_.latch, std::move(lo));
        latch_->start();
    }

    // The metrics port (prometheus-cpp's Exposer: its own threads). Its scrapes read the current
    // term under term_mu_.
    void serve_metrics(const CommandLine& cl) {
#ifdef LOCKSTEP_INVALIDATOR_WITH_PROMETHEUS
        if (cl.metrics_port >= 0) {
            const std::string address = cl.metrics_bind + ":" + std::to_string(cl.metrics_port);
            try {
                exposer_ = std::make_unique<prometheus::Exposer>(address);
            } catch (const std::exception& e) {
                throw lockstep::ConfigError("--metrics-port", "cannot listen on " + address + ": " + e.what());
            }
            collector_ = std::make_shared<lockstep::PrometheusCollector>();
            collector_->add_invalidator(c_.options.name, [&] {
                std::lock_guard g(term_mu_);
                return term_ ? term_->follower->metrics() : last_metrics_;
            });
            auto inspector_metrics = [&] {
                std::lock_guard g(term_mu_);
                return term_ && term_->inspector ? term_->inspector->metrics() : lockstep::InspectorMetrics{};
            };
            std::function<bool()> inspector_connected;
            if (c_.inspector) {
                collector_->add_inspector(c_.options.name, inspector_metrics);
                inspector_connected = [inspector_metrics] { return inspector_metrics().connected; };
            }
            // A standby (--ha) follows nothing: it answers connected 0.
            health_ = std::make_shared<HealthCollectable>(
                c_.options.name,
                [&] {
                    std::lock_guard g(term_mu_);
                    return term_ && term_->follower->metrics().connected;
                },
                inspector_connected);
            exposer_->RegisterCollectable(collector_, "/metrics");
            exposer_->RegisterCollectable(health_, "/health");
            std::cerr << "lockstep-invalidator: metrics on http://" << cl.metrics_bind << ":"
                      << exposer_->GetListeningPorts().front() << "/metrics" << std::endl;
        }
#else
        if (cl.metrics_port >= 0) {
            throw lockstep::ConfigError("--metrics-port", "this lockstep-invalidator was built without prometheus-cpp");
        }
#endif
    }

    // The main loop: campaigns and follows (--ha), and prints a metrics line every tick.
    void follow(const CommandLine& cl) {
        auto tick = std::chrono::duration<double>(cl.progress > 0 ? cl.progress : 1.0);
        auto next = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(tick);
        while (!stop_requested.load()) {
            if (c_.ha) {
                step_ha();
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
            if (std::chrono::steady_clock::now() < next) continue;
            next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(tick);
            auto line = snapshot(false);
            if (cl.progress > 0) std::cout << line << std::endl;
            if (!cl.metrics_file.empty()) std::ofstream(cl.metrics_file, std::ios::trunc) << line << "\n";
        }
    }

    // One step of --ha: begin a term when elected, end it when it ends or is fenced out.
    void step_ha() {
        if (!term_) {
            // Campaigning: follow as soon as elected, with this term's epoch as the fence.
            if (latch_->await_leadership(std::chrono::milliseconds(50))) {
                term_token_ = latch_->term_stop_token();
                epoch_ = latch_->epoch();
                if (!term_token_.stop_requested() && epoch_ > 0) {
                    lockstep::logger()->info("invalidator: active, epoch {}", epoch_);
                    auto next_term = begin_term(epoch_);
                    std::lock_guard g(term_mu_);
                    term_ = std::move(next_term);
                }
            }
        } else if (term_token_.stop_requested()) {
            end_term("the term ended");
        } else if (term_->follower->metrics().fenced_out) {
            // A newer epoch wrote the position: this latch's view is late. Give the leadership up
            // and campaign again.
            end_term("a newer leader's epoch fenced the position");
            latch_->close();
            new_latch();
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

    std::string snapshot(bool final) {
        std::lock_guard g(term_mu_);
        if (term_) last_metrics_ = term_->follower->metrics();
        nlohmann::json j = to_json(last_metrics_);
        j["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        j["active"] = term_ != nullptr;
        if (term_ && term_->inspector) j["inspector"] = to_json(term_->inspector->metrics());
        if (c_.ha) j["ha"] = {{"leader", latch_->is_leader()}, {"epoch", epoch_}, {"terms", latch_->terms()}};
        if (final) j["final"] = true;
        return j.dump();
    }

    void end_term(const char* why) {
        if (!term_) return;
        term_->stop();
        std::lock_guard g(term_mu_);
        last_metrics_ = term_->follower->metrics();
        term_.reset();
        lockstep::logger()->warn("invalidator: stopped following (epoch {}): {}", epoch_, why);
    }

    Config c_;
    lockstep::RedisClient redis_;
    std::unique_ptr<lockstep::LockService> locks_;
    std::unique_ptr<lockstep::LeaderLatch> latch_;
    std::mutex term_mu_;  // guards term_ and last_metrics_ against the metrics port's scrapes
    std::unique_ptr<Term> term_;
    lockstep::InvalidatorMetrics last_metrics_;  // of the last term, while standing by
    std::int64_t epoch_ = 0;
    std::stop_token term_token_;
#ifdef LOCKSTEP_INVALIDATOR_WITH_PROMETHEUS
    std::unique_ptr<prometheus::Exposer> exposer_;
    std::shared_ptr<lockstep::PrometheusCollector> collector_;
    std::shared_ptr<HealthCollectable> health_;
#endif
    std::chrono::steady_clock::time_point started_;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{kDescription};
    CommandLine cl;
    add_options(app, cl);
    CLI11_PARSE(app, argc, argv);

    try {
        Config c = load_config(cl);
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        Invalidator invalidator(std::move(c));
        return invalidator.run(cl);
    } catch (const lockstep::ConfigError& e) {
        std::cerr << "lockstep-invalidator: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "lockstep-invalidator: " << e.what() << "\n";
        return 1;
    }
}
