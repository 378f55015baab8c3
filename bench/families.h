// The benchmark families of lockstep-bench. Each registers its Google Benchmark functions
// (ours and the baseline it is compared with, plus the helpers its notes need) and the table
// rows computed from them. Rows are numbered in the order of the issue.
#pragma once

#include "environment.h"
#include "report.h"

namespace lockstep::bench {

namespace row_order {
constexpr int kCacheHit = 10;
constexpr int kLockCycle = 20;
constexpr int kRedlock = 25;
constexpr int kHandover = 30;
constexpr int kFairness = 35;
constexpr int kWriter = 40;
constexpr int kOversell = 50;
constexpr int kDbAuthority = 60;
constexpr int kStampede = 70;
constexpr int kMixed = 80;
constexpr int kMemory = 90;  // 90..94: one row per layout
constexpr int kCodec = 100;
constexpr int kLockBackends = 110;  // 110..118: MySQL and ZooKeeper cycles, contended per backend
constexpr int kOutbox = 45;
constexpr int kFollower = 46;  // 46, 47: the binlog follower's lag and throughput
constexpr int kFollowerFailover = 48;  // the follower through a primary failover
constexpr int kClusterCycle = 21;  // the 3-master cluster ÷ one node
constexpr int kClusterHit = 22;
constexpr int kFairCycle = 23;   // the fair Redis mutex against the same floor
constexpr int kNearHit = 12;     // 12..15: near hit, near miss, memory per near entry, delivery
constexpr int kHoldCycle = 24;   // a movable Hold's cycle against lock()/unlock()
constexpr int kLossDetection = 120;  // 120..124: a partitioned holder's loss margin per backend
constexpr int kTlsHit = 130;     // 130..132: cache hit, lock cycle, point SELECT over TLS ÷ plain
constexpr int kTlsCycle = 131;
constexpr int kTlsSelect = 132;
constexpr int kCoordination = 140;   // 140..147: job slot, run record, semaphore, leader failover
constexpr int kScale = 200;      // --scale: one row per size of each curve, in registration order
}  // namespace row_order

void register_db_authority(Environment& env, Plan& plan);

#if LOCKSTEP_BENCH_HAS_LOCKS
void register_lock_cycle(Environment& env, Plan& plan);
// RedisMutex::acquire() + Hold::release() ÷ lock() + unlock() of the same mutex.
void register_hold_cycle(Environment& env, Plan& plan);
// Redlock over 5 independent masters vs the single-node cycle, and the sequential fan-out.
void register_redlock(Environment& env, Plan& plan);
void register_handover(Environment& env, Plan& plan);
void register_oversell(Environment& env, Plan& plan);
// 16 threads on one name: shares, barging, longest wait, hand-over percentiles (item 5).
void register_fairness(Environment& env, Plan& plan);
// The fairness measurement per setting of the local gate; no table row (registered only when a
// --benchmark_filter is given).
void register_fairness_sweep(Environment& env);
// The second process of the contended hand-over: `lockstep-bench --handover-worker ...`.
int handover_worker_main(int argc, char** argv);
// MySQL's and ZooKeeper's lock cycle against their raw floors; 16-way contention per backend.
void register_lock_backends(Environment& env, Plan& plan);
// Lock cycle and cache hit on a 3-master cluster ÷ the same on one node.
void register_cluster(Environment& env, Plan& plan);
// A holder partitioned by fault proxies: how long before a rival acquires it knows, per backend.
void register_loss_detection(Environment& env, Plan& plan);
// A cache hit, a lock cycle and a point SELECT over TLS ÷ the same in plain text, same servers.
void register_tls(Environment& env, Plan& plan);
#endif

#if LOCKSTEP_BENCH_HAS_COORDINATION
// Job slot, run record, semaphore and leader failover against the lock cycle (coordination/).
void register_coordination(Environment& env, Plan& plan);
// The leading child of the failover rows: `lockstep-bench --leader-worker PREFIX NAME LEASE_MS`.
int leader_worker_main(int argc, char** argv);
#endif

#if LOCKSTEP_BENCH_HAS_STRATEGIES
void register_cache_hit(Environment& env, Plan& plan);
void register_writer(Environment& env, Plan& plan);
void register_stampede(Environment& env, Plan& plan);
void register_mixed(Environment& env, Plan& plan);
// Bytes in Redis per held lock and per cached entry, client heap per hold and connection.
void register_memory(Environment& env, Plan& plan);
// BinaryCodec against JsonCodec: decode alone, and a cache hit with the codec opted in.
void register_codec(Environment& env, Plan& plan);
// The transactional outbox's cost per write (C5, docs/invalidation.md).
void register_outbox(Environment& env, Plan& plan);
// The near cache: hit ÷ raw GET, miss ÷ plain hit, memory per entry (docs/near-cache.md).
void register_near_cache(Environment& env, Plan& plan);
// --scale: per-operation cost as the work grows (hot keys, holds, waiters, processes), each size
// against the smallest size of its curve in the same run (bench_scale.cpp).
void register_scale(Environment& env, Plan& plan);
// --scale: Redis memory per cached entry at 10k and 1M entries ÷ a raw SET of the payload.
void register_scale_entry_memory(Environment& env, Plan& plan);
#endif

#if LOCKSTEP_BENCH_HAS_INVALIDATION
// The binlog follower's lag (UPDATE -> key gone) and throughput (docs/invalidation.md).
void register_follower(Environment& env, Plan& plan);
// The follower through a primary failover: its gap and the keys it flushed (shown).
void register_follower_failover(Environment& env, Plan& plan);
// --scale: the follower catching up a backlog of 10k, 100k and 1M rows (rate, memory).
void register_scale_follower_backlog(Environment& env, Plan& plan);
#endif

}  // namespace lockstep::bench
