// The MySQL backend's scheme for open_lock_service: mysql:// (GET_LOCK on a pinned session).
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/mysql_lock_service.h"

namespace lockstep::locks_detail {

void register_mysql_lock_backend() {
    register_lock_backend("mysql", [](std::string_view url, LockServiceOptions o) -> std::unique_ptr<LockService> {
        return std::make_unique<MysqlLockService>(parse_mysql_url(url), std::move(o));
    });
}

}  // namespace lockstep::locks_detail
