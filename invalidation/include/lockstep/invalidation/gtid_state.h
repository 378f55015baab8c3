// GtidState: a MariaDB GTID position, the last GTID of each replication domain
// ("0-1-17,1-5-3"), as @@gtid_binlog_pos prints it and @slave_connect_state takes it.
//
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "lockstep/invalidation/binlog_event.h"

namespace lockstep {

class GtidState {
public:
    GtidState() = default;
    // Throws ConfigError on text that is not a comma-separated list of domain-server-sequence.
    static GtidState parse(const std::string& text);

    void update(const binlog::Gtid& gtid) { last_[gtid.domain] = gtid; }
    // True when, in every domain of `other`, this state is at or past other's sequence.
    bool covers(const GtidState& other) const;
    bool empty() const noexcept { return last_.empty(); }
    std::string to_string() const;

private:
    std::map<std::uint32_t, binlog::Gtid> last_;
};

}  // namespace lockstep
