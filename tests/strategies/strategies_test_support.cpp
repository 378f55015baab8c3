#include "strategies_test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "lockstep/core/uri.h"
#include "lockstep/servers/demo_schema.h"
#include "test_servers.h"

extern char** environ;

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

Child::Child(const std::string& role, const std::map<std::string, std::string>& env) {
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
    vars.push_back("LOCKSTEP_STRATEGIES_CHILD=" + role);
    vars.push_back("LOCKSTEP_STRATEGIES_REDIS=" + to_url(strategies_redis_options()));
    vars.push_back("LOCKSTEP_STRATEGIES_MYSQL=" + to_url(strategies_mysql_options()));
    for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);

    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::string exe = "/proc/self/exe";
    char* argv[] = {exe.data(), nullptr};
    int rc = ::posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    }
    out_ = fds[0];
}

Child::~Child() {
    if (!reaped_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
    }
    if (out_ >= 0) ::close(out_);
}

std::optional<std::string> Child::expect(const std::string& prefix, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            if (line.rfind(prefix, 0) == 0) return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{out_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char buf[4096];
        ssize_t n = ::read(out_, buf, sizeof buf);
        if (n <= 0) return std::nullopt;
        buffer_.append(buf, static_cast<std::size_t>(n));
    }
}

int Child::wait() {
    if (!reaped_) {
        ::waitpid(pid_, &status_, 0);
        reaped_ = true;
    }
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    return 128 + WTERMSIG(status_);
}

}  // namespace lockstep::test
