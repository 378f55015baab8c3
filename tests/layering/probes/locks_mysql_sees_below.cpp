// Controls: what a part may include compiles, so a "No such file" above is the layering.
#include "lockstep/core/error.h"
#include "lockstep/db/transaction.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/mysql_lock_service.h"
