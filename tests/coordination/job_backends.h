// The lock backends the job tests run against, opened on this binary's private servers (and a
// private ZooKeeper and five Redis masters, started on first use).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/locks/lock_service.h"

namespace lockstep::test {

// "memory", "redis", "redis-fair", "mysql", "zookeeper" (when built), "redlock".
std::vector<std::string> job_backends();
// The URL of `backend` on the private servers; "" when it cannot run here.
std::string job_backend_url(const std::string& backend);
// A fresh service of `backend`: another node.
std::unique_ptr<LockService> open_job_backend(const std::string& backend, const std::string& prefix);
// False for memory (its services are independent worlds: two nodes share one service).
bool cross_process(const std::string& backend);
// How long a SIGKILLed holder keeps the job's lock (with the lease the tests use, kTestLease).
std::chrono::milliseconds kill_bound(const std::string& backend);
inline constexpr std::chrono::milliseconds kTestLease{600};

}  // namespace lockstep::test
