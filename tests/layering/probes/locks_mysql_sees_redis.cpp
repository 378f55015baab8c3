#include "lockstep/locks/redis_mutex.h"  // the MySQL backend must not see the Redis backend
