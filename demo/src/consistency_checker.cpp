#include "consistency_checker.h"

#include <algorithm>
#include <iterator>

#include "stats.h"

namespace lockstep::demo {

void ConsistencyChecker::initial(std::int64_t key, std::int64_t version) {
    writes_[key].push_back({key, version, 0, 0});
}

void ConsistencyChecker::final_state(std::int64_t key, std::optional<std::int64_t> cached,
                                     std::optional<std::int64_t> db) {
    // Nothing cached is never wrong; a cached "not found" (0) for an existing row is.
    if (!cached) return;
    if (*cached != db.value_or(0)) disagreeing_.push_back(key);
}

std::optional<std::int64_t> ConsistencyChecker::first_newer_commit(std::int64_t key, std::int64_t version,
                                                                   std::int64_t t, bool returned) const {
    auto it = writes_.find(key);
    if (it == writes_.end()) return std::nullopt;
    std::optional<std::int64_t> first;
    for (const auto& w : it->second) {
        if (w.version > version && (returned ? w.done_us : w.commit_us) < t) {
            if (!first || w.commit_us < *first) first = w.commit_us;
        }
    }
    return first;
}

ConsistencyReport ConsistencyChecker::analyse() {
    ConsistencyReport r;
    for (auto& [key, list] : writes_) {
        std::sort(list.begin(), list.end(), [](const WriteRecord& a, const WriteRecord& b) { return a.version < b.version; });
    }
    Samples ages;
    r.reads = reads_.size();
    for (const auto& read : reads_) {
        if (auto since = first_newer_commit(read.key, read.version, read.start_us)) {
            ++r.stale_reads;
            ages.add(static_cast<double>(read.start_us - *since) / 1000.0);
            if (first_newer_commit(read.key, read.version, read.start_us, true)) ++r.lasting_stale_reads;
        }
    }
    r.stale_read_rate = r.reads ? static_cast<double>(r.stale_reads) / static_cast<double>(r.reads) : 0;
    r.stale_read_age_max_ms = ages.max();
    r.stale_read_age_p99_ms = ages.percentile(99);

    // Stale entries: per key, consecutive stale samples form one episode.
    std::sort(samples_.begin(), samples_.end(), [](const CacheSample& a, const CacheSample& b) {
        return a.key != b.key ? a.key < b.key : a.at_us < b.at_us;
    });
    r.samples = samples_.size();
    Samples lives;
    std::int64_t current_key = 0;
    std::optional<std::int64_t> episode_start, episode_last;
    bool episode_lasting = false;
    auto close = [&] {
        if (episode_start) {
            const double life = static_cast<double>(*episode_last - *episode_start) / 1000.0;
            lives.add(life);
            std::size_t b = 0;
            while (b < std::size(kLifeBucketsMs) && life > kLifeBucketsMs[b]) ++b;
            ++r.stale_entry_life_histogram[b];
            if (episode_lasting) ++r.lasting_stale_entries;
        }
        episode_start.reset();
        episode_last.reset();
        episode_lasting = false;
    };
    r.stale_entry_life_histogram.assign(std::size(kLifeBucketsMs) + 1, 0);
    for (const auto& s : samples_) {
        if (s.key != current_key) {
            close();
            current_key = s.key;
        }
        std::optional<std::int64_t> since;
        if (s.version) since = first_newer_commit(s.key, *s.version, s.at_us);
        if (since) {
            if (!episode_start) episode_start = *since;
            episode_last = s.at_us;
            if (first_newer_commit(s.key, *s.version, s.at_us, true)) episode_lasting = true;
        } else {
            close();
        }
    }
    close();
    r.stale_entries = lives.size();
    r.stale_entry_life_max_ms = lives.max();
    r.stale_entry_life_p99_ms = lives.percentile(99);
    r.disagreeing_keys = disagreeing_;
    return r;
}

nlohmann::json ConsistencyChecker::to_json(const std::vector<ReadRecord>& reads) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : reads) a.push_back({r.key, r.version, r.start_us, r.end_us});
    return a;
}

nlohmann::json ConsistencyChecker::to_json(const std::vector<WriteRecord>& writes) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& w : writes) a.push_back({w.key, w.version, w.commit_us, w.done_us});
    return a;
}

void ConsistencyChecker::add_json(const nlohmann::json& reads, const nlohmann::json& writes) {
    for (const auto& r : reads) {
        add(ReadRecord{r[0].get<std::int64_t>(), r[1].get<std::int64_t>(), r[2].get<std::int64_t>(),
                       r[3].get<std::int64_t>()});
    }
    for (const auto& w : writes) {
        add(WriteRecord{w[0].get<std::int64_t>(), w[1].get<std::int64_t>(), w[2].get<std::int64_t>(),
                        w[3].get<std::int64_t>()});
    }
}

}  // namespace lockstep::demo
