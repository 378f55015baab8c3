// The fault points of CachedRepository (core/fault_point.h explains arming them). The names are
// stable: the tests and the demo use them to force every race of docs/races.md.
//
//   repo.after_db_read          a read loaded from the database, before it backfills     C2, C4
//   repo.before_commit          a write, after before_commit() (the first delete of
//                               DelayedDoubleDelete/DeleteThenCommit), before COMMIT     C3
//   repo.after_commit           a write committed, before after_commit() (DEL or set)     C1, C5
//   repo.between_deletes        DelayedDoubleDelete: after the post-commit DEL, before
//                               the delayed one is scheduled                             C4
//   repo.before_delayed_delete  on the scheduler thread, before the delayed DEL           C4
//   repo.before_cache_set       WriteThrough: before the versioned set                   C1
//
// Every repository fires the same names; to stop one actor only, arm with
// ArmOptions::only_thread.
#pragma once

#include <string_view>

namespace lockstep::repo_points {

inline constexpr std::string_view after_db_read = "repo.after_db_read";
inline constexpr std::string_view before_commit = "repo.before_commit";
inline constexpr std::string_view after_commit = "repo.after_commit";
inline constexpr std::string_view between_deletes = "repo.between_deletes";
inline constexpr std::string_view before_delayed_delete = "repo.before_delayed_delete";
inline constexpr std::string_view before_cache_set = "repo.before_cache_set";

}  // namespace lockstep::repo_points
