// lockstep logs through one spdlog logger named "lockstep". By default it writes to stderr at
// level `warn` (override with the environment variable LOCKSTEP_LOG_LEVEL=trace|debug|info|...),
// each line with its time, level, process id and thread id.
// Replace it with your own logger (sinks, level, format) with `set_logger`.
//
// Thread safety: `logger()` and `set_logger()` may be called from any thread.
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace lockstep {

// The current lockstep logger; never null.
std::shared_ptr<spdlog::logger> logger();

// Replaces the lockstep logger. Passing nullptr restores the default stderr logger.
void set_logger(std::shared_ptr<spdlog::logger> replacement);

}  // namespace lockstep
