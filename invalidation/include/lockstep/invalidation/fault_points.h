// The fault points of the invalidation layer (core/fault_point.h explains arming them). The names
// are stable: the tests use them to force the races of docs/races.md.
//
//   invalidation.before_second_delete  BinlogInvalidator's re-delete thread, a batch of groups
//                                      whose first DEL landed `second_delete_delay` ago, before
//                                      their second DEL                                      C9, C5
//                                      (the visibility window: docs/invalidation.md)
//   invalidation.after_stream_open     BinlogInvalidator, its dump connection just opened, before
//                                      the first event is read: a test holds it there while a
//                                      backlog of transactions reaches the socket, so that they
//                                      are flushed as one batch (one pipeline)
#pragma once

#include <string_view>

namespace lockstep::invalidation_points {

inline constexpr std::string_view before_second_delete = "invalidation.before_second_delete";
inline constexpr std::string_view after_stream_open = "invalidation.after_stream_open";

}  // namespace lockstep::invalidation_points
