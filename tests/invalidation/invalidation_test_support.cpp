#include "invalidation_test_support.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lockstep/core/uri.h"
#include "lockstep/servers/demo_schema.h"

namespace lockstep::test {

void to_json(nlohmann::json& j, const Item& p) {
    j = nlohmann::json{{"id", p.id}, {"name", p.name}, {"price", p.price}, {"stock", p.stock}};
}
void from_json(const nlohmann::json& j, Item& p) {
    p.id = j.at("id").get<std::int64_t>();
    p.name = j.at("name").get<std::string>();
    p.price = j.at("price").get<std::int64_t>();
    p.stock = j.at("stock").get<int>();
}

Entity<Item> item_entity() {
    Entity<Item> e;
    e.name = "product";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        return Item{r.get<std::int64_t>("id"), r.get<std::string>("name"), r.get<std::int64_t>("price"), r.get<int>("stock")};
    };
    e.to_columns = [](const Item& p) { return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}}; };
    e.id_of = [](const Item& p) { return p.id; };
    return e;
}

MysqlPool& db() {
    static MysqlPool* pool = [] {
        MysqlOptions o = servers().mysql_options();
        o.pool_size = 16;
        auto* p = new MysqlPool(o);
        lockstep::testing::bootstrap_demo_schema(*p);
        return p;
    }();
    return *pool;
}

RedisClient& redis() {
    static RedisClient* client = [] {
        RedisOptions o = servers().redis_options();
        o.pool_size = 16;
        return new RedisClient(o);
    }();
    return *client;
}

namespace {
std::atomic<int> counter{0};
}

std::string fresh_prefix() { return "inv" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ":"; }

std::int64_t fresh_id() {
    return static_cast<std::int64_t>(::getpid()) * 1000000 + 500000 + counter++;
}

std::uint32_t fresh_server_id() { return 1000u + static_cast<std::uint32_t>(::getpid() % 100000) * 10u + static_cast<std::uint32_t>(counter++ % 10); }

void mariadb_client(const std::string& sql) {
    MysqlOptions o = servers().mysql_options();
    std::vector<std::string> args = {"mariadb", "--no-defaults", "-h", o.host, "-P", std::to_string(o.port), "-u", o.user,
                                     "-D", o.database, "-e", sql};
    if (!o.password.empty()) args.push_back("-p" + o.password);
    lockstep::testing::ChildProcess client(args, {}, "mariadb");
    if (client.wait() != 0) throw std::runtime_error("mariadb client failed: " + sql);
}

std::optional<std::chrono::microseconds> time_until_gone(const std::string& key, std::chrono::milliseconds timeout) {
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + timeout;
    for (;;) {
        if (redis().command({"EXISTS", key}).integer() == 0) {
            return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
        }
        if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

InvalidationMap products_map(const std::string& prefix) {
    return InvalidationMap({{.table = "products", .entity = "product", .prefix = prefix}});
}

BinlogInvalidatorOptions follower_options(const std::string& name) {
    BinlogInvalidatorOptions o;
    o.name = name;
    o.server_id = fresh_server_id();
    o.heartbeat = std::chrono::milliseconds(100);
    o.read_timeout = std::chrono::milliseconds(1000);
    o.save_interval = std::chrono::milliseconds(0);
    o.flush_on_fresh_start = false;
    o.on_error = [](std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            std::fprintf(stderr, "follower: %s\n", ex.what());
        }
    };
    return o;
}

namespace {

std::map<std::string, std::string> child_env(const std::string& role,
                                             const std::map<std::string, std::string>& env) {
    std::map<std::string, std::string> all = {
        {"LOCKSTEP_INVALIDATION_CHILD", role},
        {"LOCKSTEP_INVALIDATION_REDIS", to_url(servers().redis_options())},
        {"LOCKSTEP_INVALIDATION_MYSQL", to_url(servers().mysql_options())}};
    for (const auto& [name, value] : env) all[name] = value;
    return all;
}

}  // namespace

Child::Child(const std::string& role, const std::map<std::string, std::string>& env)
    : ChildProcess({"invalidation-child"}, child_env(role, env)) {}

Child::Child(const std::vector<std::string>& argv) : ChildProcess(argv, {}, argv.at(0)) {}

void Child::kill_now() {
    signal(SIGKILL);
    wait();
}

int Child::terminate(std::chrono::milliseconds timeout) {
    signal(SIGTERM);
    if (auto code = wait_for(timeout)) return *code;
    kill_now();
    return -1;
}

}  // namespace lockstep::test
