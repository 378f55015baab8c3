#include "product_repository.h"

#include "delete_then_commit.h"
#include "write_then_set.h"

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/redis_lock_service.h"

namespace lockstep::demo {

void to_json(nlohmann::json& j, const Product& p) {
    j = nlohmann::json{{"id", p.id}, {"name", p.name}, {"price", p.price}, {"stock", p.stock}, {"version", p.version}};
}

void from_json(const nlohmann::json& j, Product& p) {
    j.at("id").get_to(p.id);
    j.at("name").get_to(p.name);
    j.at("price").get_to(p.price);
    j.at("stock").get_to(p.stock);
    p.version = j.value("version", std::int64_t{0});
}

Entity<Product> product_entity() {
    Entity<Product> e;
    e.name = "product";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        Product p;
        p.id = r.get<std::int64_t>("id");
        p.name = r.get<std::string>("name");
        p.price = r.get<std::int64_t>("price");
        p.stock = r.get<int>("stock");
        p.version = r.get<std::int64_t>("version");
        return p;
    };
    e.to_columns = [](const Product& p) { return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}}; };
    e.id_of = [](const Product& p) { return p.id; };
    return e;
}

const std::vector<StrategyInfo>& strategy_infos() {
    static const std::vector<StrategyInfo> all = {
        {"WriteThenDelete", "WriteThenDelete", false},
        {"DelayedDoubleDelete", "DelayedDoubleDelete(" + std::to_string(kDoubleDeleteDelay.count()) + "ms)", false},
        {"TtlBounding", "TtlBounding(" + std::to_string(kTtlBound.count()) + "ms)", false},
        {"WriteThrough", "WriteThrough", false},
        {"Lease", "Lease", false},
        {"DeleteThenCommit", "DeleteThenCommit (demo-only)", true},
        {"WriteThenSet", "WriteThenSet (demo-only)", true},
    };
    return all;
}

std::shared_ptr<const WriteStrategy> make_strategy(const std::string& name) {
    if (name == "WriteThenDelete") return std::make_shared<WriteThenDelete>();
    if (name == "DelayedDoubleDelete") return std::make_shared<DelayedDoubleDelete>(kDoubleDeleteDelay);
    if (name == "TtlBounding") return std::make_shared<TtlBounding>(kTtlBound);
    if (name == "WriteThrough") return std::make_shared<WriteThrough>();
    if (name == "Lease") return std::make_shared<Lease>();
    if (name == "DeleteThenCommit") return std::make_shared<DeleteThenCommit>();
    if (name == "WriteThenSet") return std::make_shared<WriteThenSet>();
    throw ConfigError("strategy", "unknown strategy '" + name + "'");
}

LockMode lock_mode_named(const std::string& name) {
    if (name == "None") return LockMode::None;
    if (name == "Mutex") return LockMode::Mutex;
    if (name == "ReadWrite") return LockMode::ReadWrite;
    throw ConfigError("lock mode", "unknown lock mode '" + name + "'");
}

RepositoryOptions repository_options(Services& services, const std::string& strategy, LockMode mode,
                                     std::chrono::milliseconds ttl) {
    RepositoryOptions o;
    o.strategy = make_strategy(strategy);
    o.lock_mode = mode;
    if (mode != LockMode::None) o.lock_service = &services.lock_service();
    o.key_prefix = services.prefix();
    o.ttl = ttl;
    o.ttl_jitter = std::chrono::milliseconds(0);
    o.lock_wait = std::chrono::seconds(20);
    o.guard_wait = std::chrono::seconds(20);
    o.marker_ttl = std::chrono::seconds(20);
    return o;
}

std::optional<std::int64_t> cached_version(RedisClient& redis, const std::string& key) {
    auto bytes = redis.get(key);
    if (!bytes) return std::nullopt;
    auto entry = CacheEntry::decode(*bytes);
    if (!entry || entry->kind == CacheEntry::Kind::Marker) return std::nullopt;
    if (entry->kind == CacheEntry::Kind::NotFound) return 0;
    return entry->version;
}

std::optional<std::int64_t> db_version(MysqlPool& db, std::int64_t id) {
    auto row = db.query_one("SELECT version FROM products WHERE id = ?", {id});
    if (!row) return std::nullopt;
    return row->get<std::int64_t>("version");
}

}  // namespace lockstep::demo
