// The ZooKeeper backend's scheme for open_lock_service: zookeeper://host:port[,host:port...].
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/zookeeper_lock_service.h"

namespace lockstep::locks_detail {

void register_zookeeper_lock_backend() {
    register_lock_backend("zookeeper", [](std::string_view url, LockServiceOptions o) -> std::unique_ptr<LockService> {
        return std::make_unique<ZooKeeperLockService>(parse_zookeeper_url(url), std::move(o));
    });
}

}  // namespace lockstep::locks_detail
