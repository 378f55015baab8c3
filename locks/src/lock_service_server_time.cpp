// LockService::server_time()'s default: a backend without a server clock says so.
#include <string>

#include "lockstep/core/error.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

std::chrono::system_clock::time_point LockService::server_time() {
    throw ConfigError("server_time", "the " + std::string(backend()) + " lock backend has no server clock to read");
}

}  // namespace lockstep
