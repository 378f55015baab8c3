#include "demo_follower.h"

#include <chrono>
#include <random>

#include "lockstep/invalidation/position_store.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;

// A replica id no other follower of this server uses (MariaDB evicts a second dump connection
// registering with the same id).
std::uint32_t follower_server_id() {
    std::random_device rd;
    return 100000u + rd() % 1000000000u;
}

}  // namespace

DemoFollower::DemoFollower(DemoContext& ctx, std::string name) : ctx_(ctx), name_(std::move(name)) {
    BinlogInvalidatorOptions o;
    o.name = name_;
    o.server_id = follower_server_id();
    o.heartbeat = 100ms;
    o.read_timeout = 2s;
    o.flush_on_fresh_start = false;  // the demo's other keys are not ours to flush
    follower_ = std::make_unique<BinlogInvalidator>(
        ctx.services().mysql_options(), ctx.services().redis(),
        InvalidationMap({{.table = "products", .entity = "product", .prefix = ctx.services().prefix()}}), o);
    follower_->start();
    follower_->wait_caught_up(10s);
}

DemoFollower::~DemoFollower() {
    try {
        follower_->stop();
        // Its saved position goes too (the store opens a pool of its own: position_store.h).
        PositionStore(ctx_.services().mysql_options()).erase(name_);
    } catch (...) {
        // A demo run ending: nothing to report to.
    }
}

}  // namespace lockstep::demo
