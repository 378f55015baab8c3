#include "lockstep/locks/mysql_lock_service.h"  // the Redis backend must not see the MySQL backend
