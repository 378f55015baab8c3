// Uses public headers of every layer that needs no server, and exits 0.
#include <iostream>

#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"

int main() {
    auto o = lockstep::parse_redis_url("redis://127.0.0.1:6380/2?pool_size=4");
    try {
        lockstep::parse_mysql_url("mysql://root@localhost");
        return 1;
    } catch (const lockstep::ConfigError& e) {
        if (e.part() != "database") return 1;
    }
    std::cout << "consumer ok: redis db " << o.db << ", pool " << o.pool_size << "\n";
    return o.db == 2 && o.pool_size == 4 ? 0 : 1;
}
