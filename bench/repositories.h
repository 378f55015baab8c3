// Repositories for the benchmarks: CachedRepository<Product> over the run's Redis and MariaDB,
// keys under the run's prefix, and fresh product rows for it.
#pragma once

#include <memory>
#include <vector>

#include "environment.h"
#include "lockstep/strategies/strategies.h"
#include "product.h"

namespace lockstep::bench {

using ProductRepository = CachedRepository<Product>;

inline std::shared_ptr<ProductRepository> make_repository(Environment& env,
                                                          std::shared_ptr<const WriteStrategy> strategy,
                                                          LockMode lock_mode = LockMode::None) {
    RepositoryOptions o;
    o.strategy = std::move(strategy);
    o.lock_mode = lock_mode;
    if (lock_mode != LockMode::None) o.lock_service = &env.lock_service();
    o.key_prefix = env.prefix();
    // Long-lived entries: an entry leaves the cache only because a write removed it.
    o.ttl = std::chrono::hours(1);
    o.ttl_jitter = std::chrono::milliseconds(0);
    return std::make_shared<ProductRepository>(product_entity(), env.db(), env.redis(), std::move(o));
}

// `n` new product rows (version 1) with consecutive ids; returns the first id.
inline std::int64_t new_products(Environment& env, int n) {
    const std::int64_t first = env.new_ids(n);
    for (int i = 0; i < n; ++i) env.insert_product(first + i, 1'000'000);
    return first;
}

}  // namespace lockstep::bench
