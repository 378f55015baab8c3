#include "lockstep/core/logging.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "lockstep/core/mutex.h"

namespace lockstep {
namespace {

std::shared_ptr<spdlog::logger> make_default_logger() {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("lockstep", std::move(sink));
    // Time, level, process and thread on every line: several processes of a service share a
    // lock, and a lock's steps run on the caller's thread and on watchdog threads.
    l->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] [pid %P] [thread %t] %v");
    l->set_level(spdlog::level::warn);
    if (const char* level = std::getenv("LOCKSTEP_LOG_LEVEL")) {
        // spdlog maps an unknown name to "off": say so instead of going silent.
        auto parsed = spdlog::level::from_str(level);
        if (parsed == spdlog::level::off && std::string_view(level) != "off") {
            l->warn("LOCKSTEP_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, err, critical, off); using warn",
                    level);
        } else {
            l->set_level(parsed);
        }
    }
    return l;
}

Mutex g_mutex;
std::shared_ptr<spdlog::logger> g_logger GUARDED_BY(g_mutex);

}  // namespace

std::shared_ptr<spdlog::logger> logger() {
    MutexLock lock(g_mutex);
    if (!g_logger) g_logger = make_default_logger();
    return g_logger;
}

void set_logger(std::shared_ptr<spdlog::logger> replacement) {
    MutexLock lock(g_mutex);
    g_logger = replacement ? std::move(replacement) : make_default_logger();
}

}  // namespace lockstep
