// The in-memory backend's scheme for open_lock_service: memory: (one process, for unit tests).
#include "lockstep/locks/in_memory_lock_service.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep::locks_detail {

void register_memory_lock_backend() {
    register_lock_backend("memory", [](std::string_view, LockServiceOptions o) -> std::unique_ptr<LockService> {
        return std::make_unique<InMemoryLockService>(std::move(o));
    });
}

}  // namespace lockstep::locks_detail
