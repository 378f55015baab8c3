#include "lockstep/cache/redis_client.h"  // core must not see cache/
