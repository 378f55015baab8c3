#include "lockstep/invalidation/binlog_invalidator.h"  // strategies must not see invalidation/
