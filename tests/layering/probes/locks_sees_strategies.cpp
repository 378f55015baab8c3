#include "lockstep/strategies/cached_repository.h"  // locks must not see strategies/
