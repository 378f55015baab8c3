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
//   invalidation.before_inspector_check ConsistencyInspector's checker thread, a sampled change
//                                      due, before its first read of the key: a test holds it
//                                      there until a follower has caught up, so the check sees
//                                      what the follower did, not a race with it         C5, C9
#pragma once

#include <string_view>

namespace lockstep::invalidation_points {

inline constexpr std::string_view before_second_delete = "invalidation.before_second_delete";
inline constexpr std::string_view after_stream_open = "invalidation.after_stream_open";
inline constexpr std::string_view before_inspector_check = "invalidation.before_inspector_check";

}  // namespace lockstep::invalidation_points
