// A Redis reply as a C++ value, copied out of hiredis's redisReply so no hiredis handle escapes
// the cache layer. Strings are binary-safe (std::string with embedded NULs).
//
// Accessors of the wrong type throw ProtocolError naming the expected and actual type, so a
// script or server that answers unexpectedly is a clear error, never undefined behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class RedisReply {
public:
    enum class Type { Nil, String, Status, Integer, Array, Error };

    RedisReply() = default;  // Nil
    static RedisReply nil() { return {}; }
    static RedisReply string(std::string bytes);
    static RedisReply status(std::string text);
    static RedisReply integer(long long value);
    static RedisReply array(std::vector<RedisReply> elements);
    static RedisReply error(std::string message);

    Type type() const noexcept { return type_; }
    bool is_nil() const noexcept { return type_ == Type::Nil; }
    bool is_error() const noexcept { return type_ == Type::Error; }

    // String or Status bytes. REQUIRES: type String or Status (else ProtocolError).
    const std::string& str() const;
    // REQUIRES: type Integer.
    long long integer() const;
    // REQUIRES: type Array.
    const std::vector<RedisReply>& elements() const;
    // Nil -> nullopt, String -> bytes. REQUIRES: type Nil or String.
    std::optional<std::string> optional_string() const&;
    // The same, moving the bytes out of a reply about to go (a cache hit copies its value once,
    // out of hiredis's reply, and no more).
    std::optional<std::string> optional_string() &&;
    // Nil -> nullopt, Integer -> value. REQUIRES: type Nil or Integer.
    std::optional<long long> optional_integer() const;
    // The server's message. REQUIRES: type Error.
    const std::string& error_message() const;
    // Throws ProtocolError carrying the server's message if this is an error reply.
    const RedisReply& throw_if_error() const;

    std::string_view type_name() const noexcept;

private:
    Type type_ = Type::Nil;
    std::string str_;  // String, Status, Error
    long long integer_ = 0;
    std::vector<RedisReply> elements_;
};

std::string_view to_string(RedisReply::Type t) noexcept;

}  // namespace lockstep
