// The fault points of the invalidation layer (core/fault_point.h explains arming them). The names
// are stable: the tests use them to force the races of docs/races.md.
//
//   invalidation.before_second_delete  BinlogInvalidator's re-delete thread, a batch of groups
//                                      whose first DEL landed `second_delete_delay` ago, before
//                                      their second DEL                                      C9, C5
//                                      (the visibility window: docs/invalidation.md)
#pragma once

#include <string_view>

namespace lockstep::invalidation_points {

inline constexpr std::string_view before_second_delete = "invalidation.before_second_delete";

}  // namespace lockstep::invalidation_points
