#include "invalidation_test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lockstep/core/uri.h"
#include "lockstep/servers/demo_schema.h"

extern char** environ;

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
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, "mariadb", nullptr, nullptr, argv.data(), environ);
    if (rc != 0) throw std::runtime_error(std::string("posix_spawnp mariadb: ") + std::strerror(rc));
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("mariadb client failed: " + sql);
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

Child::Child(const std::string& role, const std::map<std::string, std::string>& env) {
    std::vector<std::string> vars;
    vars.push_back("LOCKSTEP_INVALIDATION_CHILD=" + role);
    vars.push_back("LOCKSTEP_INVALIDATION_REDIS=" + to_url(servers().redis_options()));
    vars.push_back("LOCKSTEP_INVALIDATION_MYSQL=" + to_url(servers().mysql_options()));
    for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
    spawn("/proc/self/exe", {"/proc/self/exe"}, std::move(vars));
}

Child::Child(const std::vector<std::string>& argv) { spawn(argv.at(0), argv, {}); }

void Child::spawn(const std::string& path, std::vector<std::string> args, std::vector<std::string> extra_env) {
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
    for (auto& v : extra_env) vars.push_back(std::move(v));
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    int rc = ::posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        throw std::runtime_error("posix_spawn " + path + ": " + std::strerror(rc));
    }
    out_ = fds[0];
}

int Child::terminate(std::chrono::milliseconds timeout) {
    if (reaped_ || pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill_now();
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Child::~Child() {
    kill_now();
    if (out_ >= 0) ::close(out_);
}

void Child::kill_now() {
    if (!reaped_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        reaped_ = true;
    }
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

}  // namespace lockstep::test
