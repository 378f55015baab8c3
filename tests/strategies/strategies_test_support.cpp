#include "strategies_test_support.h"

#include "lockstep/core/uri.h"
#include "lockstep/servers/demo_schema.h"
#include "test_servers.h"

namespace lockstep::test {

void to_json(nlohmann::json& j, const Product& p) {
    j = nlohmann::json{{"id", p.id}, {"name", p.name}, {"price", p.price}, {"stock", p.stock}};
}

void from_json(const nlohmann::json& j, Product& p) {
    j.at("id").get_to(p.id);
    j.at("name").get_to(p.name);
    j.at("price").get_to(p.price);
    j.at("stock").get_to(p.stock);
}

Entity<Product> product_entity() {
    Entity<Product> e;
    e.name = "product";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        return Product{r.get<std::int64_t>("id"), r.get<std::string>("name"), r.get<std::int64_t>("price"),
                       r.get<int>("stock")};
    };
    e.to_columns = [](const Product& p) { return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}}; };
    e.id_of = [](const Product& p) { return p.id; };
    e.fence_column = "fence";
    return e;
}

RedisOptions strategies_redis_options() {
    RedisOptions o = servers().redis_options();
    o.pool_size = 48;
    o.pool_wait_timeout = std::chrono::seconds(5);
    return o;
}

MysqlOptions strategies_mysql_options() {
    MysqlOptions o = servers().mysql_options();
    o.pool_size = 24;
    o.pool_wait_timeout = std::chrono::seconds(10);
    return o;
}

namespace {

struct Clients {
    Clients() : pool(strategies_mysql_options()), redis(strategies_redis_options()), locks(redis) {
        lockstep::testing::bootstrap_demo_schema(pool);
    }
    MysqlPool pool;
    RedisClient redis;
    RedisLockClient locks;
    RedisLockService lock_service{locks};
};

Clients& clients() {
    static Clients instance;
    return instance;
}

}  // namespace

MysqlPool& db() { return clients().pool; }
RedisClient& redis() { return clients().redis; }
RedisLockClient& locks() { return clients().locks; }
RedisLockService& lock_service() { return clients().lock_service; }

std::string unique_key_prefix() {
    static std::atomic<int> counter{0};
    return "t" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) + ":";
}

std::int64_t unique_id() {
    static std::atomic<std::int64_t> counter{0};
    return static_cast<std::int64_t>(::getpid()) * 1'000'000 + counter.fetch_add(1) + 1;
}

void insert_product(std::int64_t id, std::int64_t price, std::int64_t version, int stock) {
    db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, ?, ?, ?, ?)",
                 {id, "product " + std::to_string(id), price, stock, version});
}

std::optional<std::int64_t> db_version(std::int64_t id) {
    auto row = db().query_one("SELECT version FROM products WHERE id = ?", {id});
    if (!row) return std::nullopt;
    return row->get<std::int64_t>("version");
}

std::optional<std::int64_t> db_price(std::int64_t id) {
    auto row = db().query_one("SELECT price FROM products WHERE id = ?", {id});
    if (!row) return std::nullopt;
    return row->get<std::int64_t>("price");
}

void delete_products(const std::vector<std::int64_t>& ids) {
    for (auto id : ids) {
        try {
            db().execute("DELETE FROM products WHERE id = ?", {id});
        } catch (const std::exception& e) {
            ADD_FAILURE() << "cleanup of product " << id << " failed: " << e.what();
        }
    }
}

std::optional<CacheEntry> cached_entry(const std::string& key) {
    auto bytes = redis().get(key);
    if (!bytes) return std::nullopt;
    auto e = CacheEntry::decode(*bytes);
    if (!e) ADD_FAILURE() << key << " holds bytes that do not decode: " << *bytes;
    return e;
}

std::optional<std::chrono::milliseconds> cached_ttl(const std::string& key) {
    auto ttl = redis().command({"PTTL", key}).integer();
    if (ttl < 0) return std::nullopt;
    return std::chrono::milliseconds(ttl);
}

Freshness freshness(const std::string& key, std::int64_t id) {
    auto entry = cached_entry(key);
    auto version = db_version(id);
    if (!entry || entry->kind == CacheEntry::Kind::Marker) return Freshness::Fresh;
    if (entry->kind == CacheEntry::Kind::NotFound) return version ? Freshness::Stale : Freshness::Fresh;
    if (!version) return Freshness::Stale;  // a value for a row that is gone
    return entry->version < *version ? Freshness::Stale : Freshness::Fresh;
}

const char* to_string(Freshness f) { return f == Freshness::Fresh ? "fresh" : "STALE"; }

std::shared_ptr<const WriteStrategy> strategy_named(const std::string& name) {
    auto colon = name.find(':');
    std::string base = name.substr(0, colon);
    auto ms = [&] { return std::chrono::milliseconds(std::stoll(name.substr(colon + 1))); };
    if (base == "WriteThenDelete") return std::make_shared<WriteThenDelete>();
    if (base == "DelayedDoubleDelete") return std::make_shared<DelayedDoubleDelete>(ms());
    if (base == "TtlBounding") return std::make_shared<TtlBounding>(ms());
    if (base == "WriteThrough") return std::make_shared<WriteThrough>();
    if (base == "Lease") return std::make_shared<Lease>();
    throw std::invalid_argument("unknown strategy " + name);
}

LockMode lock_mode_named(const std::string& name) {
    if (name == "None") return LockMode::None;
    if (name == "Mutex") return LockMode::Mutex;
    if (name == "ReadWrite") return LockMode::ReadWrite;
    throw std::invalid_argument("unknown lock mode " + name);
}

// ---- Actor ---------------------------------------------------------------------------------

Actor::Actor(std::string name, std::function<void()> body)
    : name_(std::move(name)),
      done_(std::make_shared<std::atomic<bool>>(false)),
      error_(std::make_shared<std::exception_ptr>()) {
    thread_ = std::thread([done = done_, error = error_, body = std::move(body)] {
        try {
            body();
        } catch (...) {
            *error = std::current_exception();
        }
        done->store(true);
    });
}

Actor::~Actor() {
    if (thread_.joinable()) thread_.join();
}

bool Actor::wait_done(std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

void Actor::join() {
    if (thread_.joinable()) thread_.join();
    if (*error_) {
        try {
            std::rethrow_exception(*error_);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "actor " << name_ << " failed: " << e.what();
        }
        *error_ = nullptr;
    }
}

ActorState wait_done_or_blocked(const Actor& actor, const std::function<std::uint64_t()>& lock_waits,
                                std::uint64_t lock_waits_before, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (actor.done()) return ActorState::Done;
        if (lock_waits() > lock_waits_before) return ActorState::BlockedOnLock;
        if (std::chrono::steady_clock::now() >= deadline) {
            ADD_FAILURE() << "actor " << actor.name() << " neither finished nor blocked on a lock";
            return ActorState::TimedOut;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

fault::Arming arm_for_this_thread(std::string_view point, const fault::Gate& gate) {
    fault::ArmOptions o;
    o.times = 1;
    o.only_thread = std::this_thread::get_id();
    return fault::arm(std::string(point), gate.action(), o);
}

// ---- Child ---------------------------------------------------------------------------------

namespace {

std::map<std::string, std::string> child_env(const std::string& role,
                                             const std::map<std::string, std::string>& env) {
    std::map<std::string, std::string> all = {
        {"LOCKSTEP_STRATEGIES_CHILD", role},
        {"LOCKSTEP_STRATEGIES_REDIS", to_url(strategies_redis_options())},
        {"LOCKSTEP_STRATEGIES_MYSQL", to_url(strategies_mysql_options())}};
    for (const auto& [name, value] : env) all[name] = value;
    return all;
}

}  // namespace

Child::Child(const std::string& role, const std::map<std::string, std::string>& env)
    : ChildProcess({"strategies-child"}, child_env(role, env)) {}

}  // namespace lockstep::test
