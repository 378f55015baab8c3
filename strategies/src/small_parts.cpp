// Small out-of-line pieces: names of lock modes, metrics formatting, TtlBounding.
#include <random>

#include "lockstep/core/error.h"
#include "lockstep/strategies/lock_mode.h"
#include "lockstep/strategies/repository_metrics.h"
#include "lockstep/strategies/ttl_bounding.h"

namespace lockstep {

std::string_view to_string(LockMode mode) noexcept {
    switch (mode) {
        case LockMode::None: return "None";
        case LockMode::Mutex: return "Mutex";
        case LockMode::ReadWrite: return "ReadWrite";
    }
    return "?";
}

std::string to_string(const RepositoryMetrics& m) {
    std::string out;
    auto add = [&](const char* name, std::uint64_t v) {
        if (!out.empty()) out += ' ';
        out += name;
        out += '=';
        out += std::to_string(v);
    };
    add("hits", m.hits);
    add("negative_hits", m.negative_hits);
    add("misses", m.misses);
    add("loads", m.loads);
    add("fills", m.fills);
    add("stale_sets_refused", m.stale_sets_refused);
    add("guard_waits", m.guard_waits);
    add("guard_timeouts", m.guard_timeouts);
    add("decode_errors", m.decode_errors);
    add("cache_errors", m.cache_errors);
    add("degraded_reads", m.degraded_reads);
    add("deletes", m.deletes);
    add("deletes_failed", m.deletes_failed);
    add("deletes_retried", m.deletes_retried);
    add("deletes_abandoned", m.deletes_abandoned);
    add("deletes_pending", m.deletes_pending);
    add("lock_waits", m.lock_waits);
    add("lock_timeouts", m.lock_timeouts);
    add("locks_lost", m.locks_lost);
    return out;
}

std::string latency_report(const RepositoryMetrics& m) {
    std::string out;
    for_each_metric(
        m, [](const char*, const char*, std::uint64_t) {},
        [&](const char* name, const char*, const HistogramSnapshot& h) {
            out += std::string(name) + ": " + to_string(h) + "\n";
        });
    return out;
}

TtlBounding::TtlBounding(std::chrono::milliseconds max_ttl, std::chrono::milliseconds jitter)
    : max_ttl_(max_ttl), jitter_(jitter) {
    if (max_ttl.count() <= 0) throw ConfigError("TtlBounding.max_ttl", "must be positive");
    if (jitter.count() < 0 || jitter >= max_ttl) throw ConfigError("TtlBounding.jitter", "must be in [0, max_ttl)");
}

std::string TtlBounding::name() const {
    return "TtlBounding(" + std::to_string(max_ttl_.count()) + "ms, jitter " + std::to_string(jitter_.count()) + "ms)";
}

std::chrono::milliseconds TtlBounding::entry_ttl(std::chrono::milliseconds requested) const {
    auto cap = max_ttl_;
    if (jitter_.count() > 0) {
        thread_local std::mt19937_64 rng{std::random_device{}()};
        cap -= std::chrono::milliseconds(std::uniform_int_distribution<long long>(0, jitter_.count())(rng));
    }
    return std::min(requested, cap);
}

}  // namespace lockstep
