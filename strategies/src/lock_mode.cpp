// The names of the lock modes.
#include "lockstep/strategies/lock_mode.h"

namespace lockstep {

std::string_view to_string(LockMode mode) noexcept {
    switch (mode) {
        case LockMode::None: return "None";
        case LockMode::Mutex: return "Mutex";
        case LockMode::ReadWrite: return "ReadWrite";
    }
    return "?";
}

}  // namespace lockstep
