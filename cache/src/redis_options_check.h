// Internal: refuses RedisOptions that would make a deadline or the pool meaningless (a zero
// socket timeout would mean "block forever" to the kernel, a zero pool size a pool that never
// lends). Throws ConfigError naming the field.
#pragma once

#include "lockstep/core/redis_options.h"

namespace lockstep::detail {

void check_redis_options(const RedisOptions& options);

}  // namespace lockstep::detail
