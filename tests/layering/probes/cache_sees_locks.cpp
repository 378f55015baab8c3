#include "lockstep/locks/lock_service.h"  // cache must not see locks/
