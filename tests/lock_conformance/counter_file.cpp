#include "counter_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep::test {

long long read_counter(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return 0;
    long long v = 0;
    if (::pread(fd, &v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = 0;
    ::close(fd);
    return v;
}

void write_counter(const std::string& path, long long value) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
    if (fd < 0) return;
    (void)!::pwrite(fd, &value, sizeof value, 0);
    ::close(fd);
}

int locked_increments(LockService& service, const std::string& name, const std::string& path, int threads,
                      int per_thread) {
    std::atomic<int> errors{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
            auto m = service.make_mutex(name);
            for (int i = 0; i < per_thread; ++i) {
                try {
                    std::scoped_lock hold(*m);
                    const long long v = read_counter(path);
                    std::this_thread::yield();  // widen the read-modify-write window
                    write_counter(path, v + 1);
                } catch (const std::exception& e) {
                    std::cerr << "increment failed: " << e.what() << "\n";
                    errors.fetch_add(1);
                }
            }
        });
    }
    for (auto& w : workers) w.join();
    return errors.load();
}

}  // namespace lockstep::test
