#include "loss_report.h"

#include <exception>

#include "lockstep/core/logging.h"

namespace lockstep::locks_detail {

void report_loss(const LockLoss& loss, std::stop_source& stop,
                 const std::function<void(const LockLoss&)>& service_on_lost,
                 const std::function<void(const LockLoss&)>& lock_on_lost) noexcept {
    stop.request_stop();
    for (const auto* cb : {&service_on_lost, &lock_on_lost}) {
        if (!*cb) continue;
        try {
            (*cb)(loss);
        } catch (const std::exception& e) {
            logger()->error("lock '{}': on_lost callback threw: {}", loss.name, e.what());
        } catch (...) {
            logger()->error("lock '{}': on_lost callback threw", loss.name);
        }
    }
    // After the callbacks: the holder learns of the loss (lost() is already true) before a log
    // line's I/O.
    logger()->warn("lock '{}' ({}, owner {}) lost: {} ({})", loss.name, loss.key, loss.owner, to_string(loss.reason),
                   loss.message);
}

}  // namespace lockstep::locks_detail
