#include "lockstep/cache/redis_client.h"  // db must not see cache/
