#include "test_servers.h"

#include <unistd.h>

#include <atomic>
#include <memory>

namespace lockstep::test {

LocalServers& servers() {
    // Function-local static: started by the first test that needs it, destroyed at exit.
    static LocalServers instance;
    return instance;
}

std::string unique_prefix() {
    static std::atomic<int> counter{0};
    return "{t" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) + "}:";
}

}  // namespace lockstep::test
