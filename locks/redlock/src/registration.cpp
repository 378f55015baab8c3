// The Redlock backend's scheme for open_lock_service: redlock://host:port,host:port,...
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/redlock_lock_service.h"

namespace lockstep::locks_detail {

void register_redlock_lock_backend() {
    register_lock_backend("redlock", [](std::string_view url, LockServiceOptions o) -> std::unique_ptr<LockService> {
        return std::make_unique<RedlockLockService>(parse_redlock_url(url), std::move(o));
    });
}

}  // namespace lockstep::locks_detail
