// The lock backends the demo's per-backend rows run over, opened by URL: redis, redis-fair and
// mysql on the demo's servers; zookeeper (when built) on one private standalone server and
// redlock on five private Redis masters, each started when a row first needs it and stopped at
// exit (one of each per demo process, whichever rows use them).
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lockstep/locks/lock_service.h"
#include "services.h"

namespace lockstep::demo {

// "redis", "redis-fair", "mysql", "zookeeper" (when built), and "redlock" when `with_redlock`.
std::vector<std::string> demo_lock_backends(bool with_redlock);
// The URL open_lock_service takes for `backend`. ZooKeeper's sessions time out after
// `zookeeper_session` ms (its holds' lease).
std::string demo_lock_url(Services& services, const std::string& backend, int zookeeper_session_ms = 10000);
std::unique_ptr<LockService> open_demo_lock(Services& services, const std::string& backend, const std::string& prefix);

}  // namespace lockstep::demo
