// ConsistencyChecker: judges a random run after the fact from what the workers recorded.
//
//   - every read: key, the row version it returned, when it started and ended;
//   - every committed write: key, the version it wrote, when it committed (taken right after
//     COMMIT, so a little late: the checker never calls a read stale that was not), and when
//     the write returned, its cache step done;
//   - samples of the cache taken while the run went on: at time t, key k held version v.
//
// From these it reports
//   - stale reads: a read that returned a version older than one committed before the read
//     began, and how stale each was (read start - commit of the first newer version);
//   - lasting stale reads: of those, the ones that began after the newer version's writer had
//     returned: its cache step did not (or not durably) remove the old value (C1-C5). The others
//     fell into a writer's commit-to-delete window, which only a read-write lock closes;
//   - stale entries: runs of samples in which the cache held a version older than one already
//     committed, and how long each lived (its last stale sample - that commit); and the lasting
//     ones, seen stale after the newer version's writer had returned;
// and, given the cache and database versions after the run, the keys on which they disagree.
//
// Times are wall-clock microseconds (stats.h wall_us), comparable across processes.
// Thread safety: none; fill it from one thread after the workers are done.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::demo {

struct ReadRecord {
    std::int64_t key = 0;
    std::int64_t version = 0;  // 0: the read found no row
    std::int64_t start_us = 0;
    std::int64_t end_us = 0;
};

struct WriteRecord {
    std::int64_t key = 0;
    std::int64_t version = 0;
    std::int64_t commit_us = 0;  // right after COMMIT
    std::int64_t done_us = 0;    // when the write returned, its cache step done
};

struct CacheSample {
    std::int64_t at_us = 0;
    std::int64_t key = 0;
    std::optional<std::int64_t> version;  // nullopt: nothing usable cached
};

// Upper bounds (ms) of the stale entry lifetime histogram.
inline constexpr double kLifeBucketsMs[] = {1, 2, 5, 10, 20, 50, 100};

struct ConsistencyReport {
    std::size_t reads = 0;
    std::size_t stale_reads = 0;
    double stale_read_rate = 0;      // stale_reads / reads
    double stale_read_age_max_ms = 0;
    double stale_read_age_p99_ms = 0;
    std::size_t lasting_stale_reads = 0;
    std::size_t stale_entries = 0;   // stale episodes seen by the sampler
    std::size_t lasting_stale_entries = 0;
    double stale_entry_life_max_ms = 0;
    double stale_entry_life_p99_ms = 0;
    // How long stale entries lived: counts per bucket of kLifeBucketsMs (a life <= the bound and
    // > the previous one); the last count is the lives longer than the last bound.
    std::vector<std::size_t> stale_entry_life_histogram;
    std::size_t samples = 0;
    std::vector<std::int64_t> disagreeing_keys;  // cache != database after the run
};

class ConsistencyChecker {
public:
    // Every key's version at the start of the run (committed before it began).
    void initial(std::int64_t key, std::int64_t version);
    void add(const ReadRecord& r) { reads_.push_back(r); }
    void add(const WriteRecord& w) { writes_[w.key].push_back(w); }
    void add(const CacheSample& s) { samples_.push_back(s); }
    // After the run (and after pending deletes drained): what the cache and the database hold.
    void final_state(std::int64_t key, std::optional<std::int64_t> cached, std::optional<std::int64_t> db);

    ConsistencyReport analyse();

    // The worker side: records as JSON arrays (compact: [key, version, t1, t2]).
    static nlohmann::json to_json(const std::vector<ReadRecord>& reads);
    static nlohmann::json to_json(const std::vector<WriteRecord>& writes);
    void add_json(const nlohmann::json& reads, const nlohmann::json& writes);

private:
    // The commit time of the first version of `key` newer than `version` committed before `t`
    // (with `returned`: whose writer had returned before `t`).
    std::optional<std::int64_t> first_newer_commit(std::int64_t key, std::int64_t version, std::int64_t t,
                                                   bool returned = false) const;

    std::vector<ReadRecord> reads_;
    std::map<std::int64_t, std::vector<WriteRecord>> writes_;
    std::vector<CacheSample> samples_;
    std::vector<std::int64_t> disagreeing_;
};

}  // namespace lockstep::demo
