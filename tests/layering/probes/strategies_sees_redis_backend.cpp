#include "lockstep/locks/redis_mutex.h"  // strategies take locks through LockService, never a backend
