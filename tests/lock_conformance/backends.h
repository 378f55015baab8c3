// The backends the conformance suite runs against: one traits struct each. A test body only
// uses what is here and the LockService interface, so the same body checks every backend.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/locks/lock_options.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep::test {

// A lock-service URL for this backend on the test servers; "" when it cannot run here.
struct BackendTraits {
    std::string name;
    // True when two processes can share its locks (every backend but memory).
    bool cross_process = true;
    // Options that make a stopped holder lose its hold soon (short lease or session).
    LockOptions short_lease;
    // The longest a SIGKILLed holder may keep the lock, and a SIGSTOPped one.
    std::chrono::milliseconds kill_bound{0};
    std::chrono::milliseconds stop_bound{0};
};

// Every backend's name: "memory", "redis", "redis-fair", "mysql", "zookeeper", "redlock".
std::vector<std::string> every_backend();
// `backend` as a gtest parameter name ("redis-fair" -> "redis_fair").
std::string backend_test_name(std::string backend);
// The URL a process opens for `backend` ("memory:", "redis://...", ...).
std::string backend_url(const std::string& backend);
BackendTraits backend_traits(const std::string& backend);
// Opens the backend for this test process (a fresh service: like another process).
std::unique_ptr<LockService> open_backend(const std::string& backend, const std::string& prefix,
                                          LockServiceOptions options = {});
// Takes `name`'s hold away from the thread of `holder` that holds it, from outside, the way the
// backend loses holds (Redis: the key deleted; MySQL: the session killed; ZooKeeper: the
// session expired; memory: expire()).
void force_loss(const std::string& backend, LockService& holder, const std::string& prefix, const std::string& name);

}  // namespace lockstep::test
