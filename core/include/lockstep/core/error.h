// The error tree of lockstep: one root (`lockstep::Error`), a few kinds below it, each of which
// tells the caller what to do next through `recovery()`:
//
//   RetryCall         the call itself may be repeated (a pool wait timed out, a server is not
//                     reachable yet). NOTE: a ConnectionError raised after a command was sent may
//                     mean the command was applied; lockstep never repeats such a call on its own.
//   RetryTransaction  repeat the whole unit of work from its first read (deadlock, lock-wait
//                     timeout, a fenced or versioned write that lost to a newer one).
//   GiveUp            repeating cannot help (bad configuration, a script error, not the owner).
//
// A miss is never an error: it is an empty std::optional.
//
// Thread safety: these are plain exception values.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace lockstep {

enum class Recovery { RetryCall, RetryTransaction, GiveUp };

std::string_view to_string(Recovery r) noexcept;

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
    virtual Recovery recovery() const noexcept { return Recovery::GiveUp; }
};

// A URI, an option or an argument is malformed or out of range. `part()` names the offending
// part (e.g. "port", "query parameter 'pool_size'").
class ConfigError : public Error {
public:
    ConfigError(std::string part, const std::string& what)
        : Error("config error in " + part + ": " + what), part_(std::move(part)) {}
    const std::string& part() const noexcept { return part_; }

private:
    std::string part_;
};

// The server could not be reached, or the connection broke. If it broke after a command was
// written the command may have been applied: the caller decides whether repeating is safe.
class ConnectionError : public Error {
public:
    using Error::Error;
    Recovery recovery() const noexcept override { return Recovery::RetryCall; }
};

// A deadline passed: connect, socket read/write, or waiting for a pooled connection.
class TimeoutError : public ConnectionError {
public:
    using ConnectionError::ConnectionError;
};

// The server answered, but not with what the protocol or the caller expected (an error reply,
// a reply of the wrong type, a Lua script error).
class ProtocolError : public Error {
public:
    using Error::Error;
};

// A guarded write lost to a newer writer: a stale fencing token, a version check that failed.
class ConflictError : public Error {
public:
    using Error::Error;
    Recovery recovery() const noexcept override { return Recovery::RetryTransaction; }
};

// An error reported by MySQL/MariaDB, keeping the server's error code and SQLState.
// Deadlock (1213) and lock-wait timeout (1205) say RetryTransaction; lost connections
// (2006, 2013, 2002, 2003, 2055) say RetryCall; everything else GiveUp.
class DbError : public Error {
public:
    DbError(const std::string& what, int code, std::string sql_state);
    int code() const noexcept { return code_; }
    const std::string& sql_state() const noexcept { return sql_state_; }
    Recovery recovery() const noexcept override { return recovery_; }

    static Recovery recovery_for(int code, std::string_view sql_state) noexcept;

private:
    int code_;
    std::string sql_state_;
    Recovery recovery_;
};

// Returns the recovery advice for any exception: lockstep errors answer for themselves, anything
// else is GiveUp.
Recovery recovery_of(const std::exception& e) noexcept;

}  // namespace lockstep
