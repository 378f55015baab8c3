// Lease: versioned backfill that refuses stale sets, as memcache leases and rockscache do.
//
// A reader that misses first puts its own marker in the key (`L:<token>`, one script, only if
// the key is empty), THEN reads the database, then fills with a script that stores the value
// only if the key still holds its marker. A writer commits, then DELs the key, which destroys
// any marker: a reader whose read may predate the commit finds its marker gone and its stale
// set is refused (counted as stale_sets_refused). Why that is enough: if the writer's DEL came
// before the reader's claim, the reader's database read came after the commit.
//
// Closes C2 and C4 for any timing, without read locks. C3 is closed too (writers delete after
// commit). The marker doubles as the stampede guard (C6): other readers wait for the value.
// A marker lives `RepositoryOptions::marker_ttl`: a read slower than that loses its marker and
// its fill is refused (safe: the next read loads again).
// Cost: one script per miss to claim and one to fill (vs one SET), one DEL per write.
#pragma once

#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class Lease final : public WriteStrategy {
public:
    std::string name() const override { return "Lease"; }
    void after_commit(WriteContext& write) const override { write.delete_now(); }
    FillMode fill_mode() const noexcept override { return FillMode::IfMarker; }
};

}  // namespace lockstep
