// The adversarial suite: real servers, real signals, outside writes, bounded
// time. Each case attacks a claim of docs/locks.md for a fixed number of iterations or seconds,
// counts the violations of that claim, prints both ("[ adversary ] <case>: N iterations, V
// violations") and fails on any violation.
//
// Child processes re-execute this binary with LOCKSTEP_LOCKS_CHILD=<role> (adversary_roles.cpp),
// through the lock tests' Child helper (tests/locks/locks_test_support.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/db/mysql_pool.h"
#include "lockstep/strategies/entity.h"

namespace lockstep::adversary {

// Iterations and violations of one case, with the first few violations described.
class Tally {
public:
    explicit Tally(std::string name) : name_(std::move(name)) {}
    void iteration(std::uint64_t n = 1) { iterations_.fetch_add(n); }
    void violation(const std::string& what) {
        violations_.fetch_add(1);
        std::lock_guard lock(mutex_);
        if (examples_.size() < 10) examples_.push_back(what);
    }
    std::uint64_t iterations() const { return iterations_.load(); }
    std::uint64_t violations() const { return violations_.load(); }
    // Prints the summary line (and the examples); call once at the end of the case.
    void print(const std::string& detail = "") const {
        std::cout << "[ adversary ] " << name_ << ": " << iterations_.load() << " iterations, "
                  << violations_.load() << " violations" << (detail.empty() ? "" : "; " + detail) << "\n";
        std::lock_guard lock(mutex_);
        for (const auto& e : examples_) std::cout << "[ violation ] " << e << "\n";
    }

private:
    std::string name_;
    std::atomic<std::uint64_t> iterations_{0}, violations_{0};
    mutable std::mutex mutex_;
    std::vector<std::string> examples_;
};

// The row the repository case writes: `adv_items` (id, name, version, fence).
struct Item {
    std::int64_t id = 0;
    std::string name;
};
void to_json(nlohmann::json& j, const Item& i);
void from_json(const nlohmann::json& j, Item& i);
Entity<Item> item_entity();

// Creates adv_items and adv_fenced (id, name, fence) if missing.
void create_tables(MysqlPool& pool);

}  // namespace lockstep::adversary
