// A counter in a file, incremented without any atomicity of its own (read, yield, write): only
// the lock around it keeps increments from being lost, across threads and processes alike. It
// needs no server, so the same check fits every backend.
#pragma once

#include <string>

#include "lockstep/locks/lock_service.h"

namespace lockstep::test {

long long read_counter(const std::string& path);
void write_counter(const std::string& path, long long value);
// `threads` threads x `per_thread` increments of the file counter, each inside mutex `name`.
// Returns how many increments threw.
int locked_increments(LockService& service, const std::string& name, const std::string& path, int threads,
                      int per_thread);

}  // namespace lockstep::test
