#include "lockstep/servers/register_history.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "lockstep/servers/hold_history.h"

namespace lockstep {

namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// One event of the history: an operation's call or its return, in a doubly linked list that the
// search lifts calls (and their returns) out of as it linearises them.
struct Entry {
    std::size_t op = 0;
    bool is_call = false;
    Entry* match = nullptr;  // a call's return
    Entry* prev = nullptr;
    Entry* next = nullptr;
};

void lift(Entry* call) {
    call->prev->next = call->next;
    call->next->prev = call->prev;  // a call always has its return after it
    Entry* ret = call->match;
    ret->prev->next = ret->next;
    if (ret->next) ret->next->prev = ret->prev;
}

void unlift(Entry* call) {
    Entry* ret = call->match;
    ret->prev->next = ret;
    if (ret->next) ret->next->prev = ret;
    call->prev->next = call;
    call->next->prev = call;
}

// Which operations are linearised, and the register's value then: a search state.
struct State {
    std::vector<std::uint64_t> done;
    std::int64_t value = 0;
    bool operator==(const State&) const = default;
};

struct StateHash {
    std::size_t operator()(const State& s) const noexcept {
        std::uint64_t h = 1469598103934665603ull ^ static_cast<std::uint64_t>(s.value);
        for (auto w : s.done) h = (h ^ w) * 1099511628211ull;
        return static_cast<std::size_t>(h);
    }
};

// The register's step: can `op` happen in state `value`, and what is the value after it?
bool step(const RegisterOp& op, std::int64_t& value) {
    if (op.kind == RegisterOp::Kind::Write) {
        value = op.value;
        return true;
    }
    return !op.complete_us || op.value == value;  // a read that never returned saw anything
}

enum class Verdict { Linearizable, NotLinearizable, GaveUp };

Verdict search(const std::vector<RegisterOp>& ops, std::int64_t initial, std::size_t max_states, std::size_t& states) {
    const std::size_t n = ops.size();
    // Events sorted by time; at equal times calls first, so that ops that touch overlap.
    std::vector<Entry> entries(2 * n + 1);
    struct Event {
        std::int64_t at;
        bool is_call;
        std::size_t op;
    };
    std::vector<Event> events;
    events.reserve(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        events.push_back({ops[i].invoke_us, true, i});
        events.push_back({ops[i].complete_us.value_or(kNever), false, i});
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
        if (a.at != b.at) return a.at < b.at;
        return a.is_call && !b.is_call;
    });
    Entry* head = &entries[0];
    std::vector<Entry*> call_of(n), return_of(n);
    Entry* prev = head;
    for (std::size_t k = 0; k < events.size(); ++k) {
        Entry* e = &entries[k + 1];
        e->op = events[k].op;
        e->is_call = events[k].is_call;
        (e->is_call ? call_of : return_of)[e->op] = e;
        e->prev = prev;
        prev->next = e;
        prev = e;
    }
    for (std::size_t i = 0; i < n; ++i) call_of[i]->match = return_of[i];

    State state{std::vector<std::uint64_t>((n + 63) / 64, 0), initial};
    std::unordered_set<State, StateHash> seen;
    std::vector<std::pair<Entry*, std::int64_t>> calls;  // linearised calls, with the value before each
    Entry* entry = head->next;
    states = 0;
    while (head->next) {
        if (++states > max_states) return Verdict::GaveUp;
        if (entry->is_call) {
            std::int64_t value = state.value;
            if (step(ops[entry->op], value)) {
                State next = state;
                next.done[entry->op / 64] |= 1ull << (entry->op % 64);
                next.value = value;
                if (seen.insert(next).second) {
                    calls.emplace_back(entry, state.value);
                    state = std::move(next);
                    lift(entry);
                    entry = head->next;
                    continue;
                }
            }
            entry = entry->next;
        } else {
            // An operation returned before it could be placed: undo the last placement.
            if (calls.empty()) return Verdict::NotLinearizable;
            auto [call, before] = calls.back();
            calls.pop_back();
            state.done[call->op / 64] &= ~(1ull << (call->op % 64));
            state.value = before;
            unlift(call);
            entry = call->next;
        }
    }
    return Verdict::Linearizable;
}

std::string explain(const std::vector<RegisterOp>& ops, std::int64_t initial) {
    std::int64_t t0 = kNever;
    for (const auto& op : ops) t0 = std::min(t0, op.invoke_us);
    std::string s = "initial value " + std::to_string(initial) + "; no order of these operations explains them:\n";
    for (const auto& op : ops) {
        s += "  client " + std::to_string(op.client) + ": " +
             (op.kind == RegisterOp::Kind::Write ? "write " + std::to_string(op.value)
                                                 : "read -> " + (op.complete_us ? std::to_string(op.value) : "?")) +
             "  [+" + std::to_string((op.invoke_us - t0) / 1000.0) + " ms, " +
             (op.complete_us ? "+" + std::to_string((*op.complete_us - t0) / 1000.0) + " ms]" : "never returned]") + "\n";
    }
    return s;
}

}  // namespace

RegisterCheck check_register(const std::vector<RegisterOp>& ops, std::int64_t initial, std::size_t max_states) {
    RegisterCheck r;
    const Verdict v = search(ops, initial, max_states, r.states);
    if (v == Verdict::GaveUp) {
        r.gave_up = true;
        return r;
    }
    if (v == Verdict::Linearizable) return r;
    r.linearizable = false;
    // Greedy shrinking: drop each operation whose absence keeps the history failing, as long as
    // every value still read was written by a remaining write (or is the initial one): dropping
    // the write of a value that is read would make any history fail, and show nothing.
    auto explained = [initial](const std::vector<RegisterOp>& h) {
        for (const auto& r : h) {
            if (r.kind != RegisterOp::Kind::Read || !r.complete_us || r.value == initial) continue;
            const bool written = std::any_of(h.begin(), h.end(), [&](const RegisterOp& w) {
                return w.kind == RegisterOp::Kind::Write && w.value == r.value;
            });
            if (!written) return false;
        }
        return true;
    };
    std::vector<RegisterOp> minimal = ops;
    for (std::size_t i = minimal.size(); i-- > 0;) {
        std::vector<RegisterOp> without = minimal;
        without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
        if (explained(minimal) && !explained(without)) continue;
        std::size_t ignored = 0;
        if (search(without, initial, max_states, ignored) == Verdict::NotLinearizable) minimal = std::move(without);
    }
    r.minimal = minimal;
    r.explanation = explain(minimal, initial);
    return r;
}

std::size_t RegisterHistory::invoke_write(int client, std::int64_t value) {
    std::lock_guard g(mu_);
    ops_.push_back({client, RegisterOp::Kind::Write, value, monotonic_us(), std::nullopt});
    return ops_.size() - 1;
}

std::size_t RegisterHistory::invoke_read(int client) {
    std::lock_guard g(mu_);
    ops_.push_back({client, RegisterOp::Kind::Read, 0, monotonic_us(), std::nullopt});
    return ops_.size() - 1;
}

void RegisterHistory::complete(std::size_t op) {
    const auto now = monotonic_us();
    std::lock_guard g(mu_);
    ops_.at(op).complete_us = now;
}

void RegisterHistory::complete(std::size_t op, std::int64_t value) {
    const auto now = monotonic_us();
    std::lock_guard g(mu_);
    ops_.at(op).value = value;
    ops_.at(op).complete_us = now;
}

std::vector<RegisterOp> RegisterHistory::ops() const {
    std::lock_guard g(mu_);
    return ops_;
}

RegisterCheck RegisterHistory::check(std::size_t max_states) const { return check_register(ops(), initial_, max_states); }

}  // namespace lockstep
