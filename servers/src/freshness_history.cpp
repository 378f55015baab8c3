#include "lockstep/servers/freshness_history.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

namespace lockstep {

namespace {

const char* outcome_name(FreshnessOp::Outcome o) {
    switch (o) {
        case FreshnessOp::Outcome::Ok: return "ok";
        case FreshnessOp::Outcome::Failed: return "failed";
        case FreshnessOp::Outcome::Unknown: return "unknown";
    }
    return "?";
}

std::string ms(std::int64_t us) {
    // One decimal: staleness windows of interest run from a fraction of a millisecond upwards.
    const bool negative = us < 0;
    const std::int64_t a = negative ? -us : us;
    return std::string(negative ? "-" : "+") + std::to_string(a / 1000) + "." + std::to_string(a % 1000 / 100) + " ms";
}

std::string op_line(const FreshnessOp& op, std::int64_t t0) {
    std::string s = "  ";
    s += op.kind == FreshnessOp::Kind::Write ? "write" : "read ";
    s += " of '" + op.key + "' by " + std::to_string(op.process) + "/" + std::to_string(op.thread) + ": ";
    s += op.kind == FreshnessOp::Kind::Write ? "wrote v" : "returned v";
    s += std::to_string(op.version) + ", invoked " + ms(op.invoke_us - t0) + ", completed " + ms(op.complete_us - t0);
    if (op.outcome != FreshnessOp::Outcome::Ok) s += std::string(" (") + outcome_name(op.outcome) + ")";
    return s + "\n";
}

// A write that counts, with the instant from which reads must see it.
struct Effective {
    std::int64_t from_us;
    std::int64_t version;
    const FreshnessOp* op;
};

}  // namespace

std::string FreshnessOp::to_line() const {
    return "fresh " + std::to_string(process) + " " + std::to_string(thread) + " " + key + " " +
           (kind == Kind::Write ? "write " : "read ") + std::to_string(version) + " " + std::to_string(invoke_us) +
           " " + std::to_string(complete_us) + " " + outcome_name(outcome);
}

std::optional<FreshnessOp> FreshnessOp::from_line(const std::string& line) {
    std::istringstream in(line);
    std::string tag, kind, outcome;
    FreshnessOp op;
    if (!(in >> tag >> op.process >> op.thread >> op.key >> kind >> op.version >> op.invoke_us >> op.complete_us >>
          outcome) ||
        tag != "fresh") {
        return std::nullopt;
    }
    if (kind == "read") {
        op.kind = Kind::Read;
    } else if (kind == "write") {
        op.kind = Kind::Write;
    } else {
        return std::nullopt;
    }
    if (outcome == "ok") {
        op.outcome = Outcome::Ok;
    } else if (outcome == "failed") {
        op.outcome = Outcome::Failed;
    } else if (outcome == "unknown") {
        op.outcome = Outcome::Unknown;
    } else {
        return std::nullopt;
    }
    return op;
}

std::string FreshnessAnomaly::describe() const {
    const std::int64_t t0 = write.invoke_us;
    return "a read of '" + read.key + "' invoked " + ms(late_us) + " after a newer write had completed returned v" +
           std::to_string(read.version) + " < v" + std::to_string(write.version) + ":\n" + op_line(write, t0) +
           op_line(read, t0);
}

std::string FreshnessCheck::summary() const {
    std::string s = label.empty() ? std::string("history") : label;
    s += ": " + std::to_string(reads) + " reads, " + std::to_string(stale_within_bound) + " stale within " +
         ms(allowed_us).substr(1) + ", " + std::to_string(anomalies.size()) + " anomalies";
    if (max_late_us > 0) s += " (latest stale read " + ms(max_late_us) + ")";
    return s;
}

std::string FreshnessCheck::describe(std::size_t max_shown) const {
    std::string s = summary() + "\n";
    for (std::size_t i = 0; i < anomalies.size() && i < max_shown; ++i) s += anomalies[i].describe();
    if (anomalies.size() > max_shown) s += "  ... and " + std::to_string(anomalies.size() - max_shown) + " more\n";
    return s;
}

FreshnessCheck check_freshness(const std::vector<FreshnessOp>& ops, std::chrono::microseconds allowed_staleness,
                               std::string label) {
    FreshnessCheck out;
    out.label = std::move(label);
    out.allowed_us = allowed_staleness.count();

    struct KeyOps {
        std::vector<const FreshnessOp*> reads;
        std::vector<const FreshnessOp*> writes;
    };
    std::map<std::string_view, KeyOps> by_key;
    for (const auto& op : ops) {
        if (op.kind == FreshnessOp::Kind::Read) {
            if (op.outcome == FreshnessOp::Outcome::Ok) by_key[op.key].reads.push_back(&op);
        } else {
            by_key[op.key].writes.push_back(&op);
        }
    }

    for (auto& [key, k] : by_key) {
        // The earliest completion of a read that returned each version: the evidence that a
        // failed or unknown write of that version took effect.
        std::map<std::int64_t, std::int64_t> first_seen;
        for (const auto* r : k.reads) {
            auto [it, fresh] = first_seen.emplace(r->version, r->complete_us);
            if (!fresh) it->second = std::min(it->second, r->complete_us);
        }
        std::vector<Effective> writes;
        for (const auto* w : k.writes) {
            if (w->outcome == FreshnessOp::Outcome::Ok) {
                writes.push_back({w->complete_us, w->version, w});
            } else if (w->version != 0) {
                auto seen = first_seen.find(w->version);
                if (seen != first_seen.end()) writes.push_back({std::max(w->complete_us, seen->second), w->version, w});
            }
        }
        out.writes += writes.size();
        out.reads += k.reads.size();
        if (writes.empty()) continue;
        std::sort(writes.begin(), writes.end(),
                  [](const Effective& a, const Effective& b) { return a.from_us < b.from_us; });
        // newest[i]: the write with the highest version among writes[0..i]. A read invoked after
        // writes[0..i] must return at least newest[i]'s version; the earliest write that made it
        // stale is the first index whose running maximum exceeds what it returned.
        std::vector<std::size_t> newest(writes.size());
        for (std::size_t i = 0; i < writes.size(); ++i) {
            newest[i] = (i == 0 || writes[i].version > writes[newest[i - 1]].version) ? i : newest[i - 1];
        }
        for (const auto* r : k.reads) {
            const auto done = std::partition_point(writes.begin(), writes.end(),
                                                   [&](const Effective& w) { return w.from_us < r->invoke_us; });
            const auto n = static_cast<std::size_t>(done - writes.begin());
            if (n == 0 || writes[newest[n - 1]].version <= r->version) continue;
            // First index in [0, n) whose running maximum is above the read's version.
            std::size_t lo = 0, hi = n - 1;
            while (lo < hi) {
                const std::size_t mid = (lo + hi) / 2;
                if (writes[newest[mid]].version > r->version) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            const Effective& w = writes[newest[lo]];
            const std::int64_t late = r->invoke_us - w.from_us;
            out.max_late_us = std::max(out.max_late_us, late);
            if (late <= out.allowed_us) {
                ++out.stale_within_bound;
            } else {
                out.anomalies.push_back({*w.op, *r, late});
            }
        }
    }
    std::sort(out.anomalies.begin(), out.anomalies.end(), [](const FreshnessAnomaly& a, const FreshnessAnomaly& b) {
        return a.read.invoke_us < b.read.invoke_us;
    });
    return out;
}

FreshnessHistory::FreshnessHistory(std::string label, int process) : label_(std::move(label)), process_(process) {}

FreshnessHistory::Shard& FreshnessHistory::my_shard() {
    // Threads take shards in the order they first record: up to kShards threads never share one.
    static std::atomic<std::size_t> next{0};
    thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed);
    return shards_[mine % kShards];
}

void FreshnessHistory::read_done(int thread, std::string_view key, std::int64_t invoke_us, std::int64_t version,
                                 FreshnessOp::Outcome outcome) {
    add({process_, thread, std::string(key), FreshnessOp::Kind::Read, version, invoke_us, monotonic_us(), outcome});
}

void FreshnessHistory::write_done(int thread, std::string_view key, std::int64_t invoke_us, std::int64_t version,
                                  FreshnessOp::Outcome outcome) {
    add({process_, thread, std::string(key), FreshnessOp::Kind::Write, version, invoke_us, monotonic_us(), outcome});
}

void FreshnessHistory::add(FreshnessOp op) {
    Shard& s = my_shard();
    MutexLock lock(s.mu);
    s.ops.push_back(std::move(op));
}

std::vector<FreshnessOp> FreshnessHistory::ops() const {
    std::vector<FreshnessOp> all;
    for (const auto& s : shards_) {
        MutexLock lock(s.mu);
        all.insert(all.end(), s.ops.begin(), s.ops.end());
    }
    return all;
}

std::size_t FreshnessHistory::size() const {
    std::size_t n = 0;
    for (const auto& s : shards_) {
        MutexLock lock(s.mu);
        n += s.ops.size();
    }
    return n;
}

FreshnessCheck FreshnessHistory::check(std::chrono::microseconds allowed_staleness) const {
    return check_freshness(ops(), allowed_staleness, label_);
}

}  // namespace lockstep
