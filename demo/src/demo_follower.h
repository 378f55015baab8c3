// DemoFollower: a BinlogInvalidator over the demo's products table, for the rows that show a
// binlog follower closing a race (C5: a writer that died after COMMIT; C9: a writer that bypasses
// the library). Started caught up; stopped, with its saved position erased, when destroyed.
//
// Thread safety: one owner thread.
#pragma once

#include <memory>
#include <string>

#include "context.h"
#include "lockstep/invalidation/binlog_invalidator.h"

namespace lockstep::demo {

class DemoFollower {
public:
    // `name` names its saved position (unique per follower: ctx.unique(...)).
    DemoFollower(DemoContext& ctx, std::string name);
    ~DemoFollower();
    DemoFollower(const DemoFollower&) = delete;
    DemoFollower& operator=(const DemoFollower&) = delete;

private:
    DemoContext& ctx_;
    std::string name_;
    std::unique_ptr<BinlogInvalidator> follower_;
};

}  // namespace lockstep::demo
