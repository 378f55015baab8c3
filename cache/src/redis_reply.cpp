#include "lockstep/cache/redis_reply.h"

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

[[noreturn]] void wrong_type(std::string_view expected, const RedisReply& actual) {
    std::string message = "expected a Redis reply of type ";
    message.append(expected).append(", got ").append(actual.type_name());
    if (actual.is_error()) message.append(" (").append(actual.error_message()).append(")");
    throw ProtocolError(message);
}

}  // namespace

RedisReply RedisReply::string(std::string bytes) {
    RedisReply r;
    r.type_ = Type::String;
    r.str_ = std::move(bytes);
    return r;
}

RedisReply RedisReply::status(std::string text) {
    RedisReply r;
    r.type_ = Type::Status;
    r.str_ = std::move(text);
    return r;
}

RedisReply RedisReply::integer(long long value) {
    RedisReply r;
    r.type_ = Type::Integer;
    r.integer_ = value;
    return r;
}

RedisReply RedisReply::array(std::vector<RedisReply> elements) {
    RedisReply r;
    r.type_ = Type::Array;
    r.elements_ = std::move(elements);
    return r;
}

RedisReply RedisReply::error(std::string message) {
    RedisReply r;
    r.type_ = Type::Error;
    r.str_ = std::move(message);
    return r;
}

const std::string& RedisReply::str() const {
    if (type_ != Type::String && type_ != Type::Status) wrong_type("String or Status", *this);
    return str_;
}

long long RedisReply::integer() const {
    if (type_ != Type::Integer) wrong_type("Integer", *this);
    return integer_;
}

const std::vector<RedisReply>& RedisReply::elements() const {
    if (type_ != Type::Array) wrong_type("Array", *this);
    return elements_;
}

std::optional<std::string> RedisReply::optional_string() const& {
    if (type_ == Type::Nil) return std::nullopt;
    if (type_ != Type::String) wrong_type("Nil or String", *this);
    return str_;
}

std::optional<std::string> RedisReply::optional_string() && {
    if (type_ == Type::Nil) return std::nullopt;
    if (type_ != Type::String) wrong_type("Nil or String", *this);
    return std::move(str_);
}

std::optional<long long> RedisReply::optional_integer() const {
    if (type_ == Type::Nil) return std::nullopt;
    if (type_ != Type::Integer) wrong_type("Nil or Integer", *this);
    return integer_;
}

const std::string& RedisReply::error_message() const {
    if (type_ != Type::Error) wrong_type("Error", *this);
    return str_;
}

const RedisReply& RedisReply::throw_if_error() const {
    if (type_ == Type::Error) throw ProtocolError("Redis error reply: " + str_);
    return *this;
}

std::string_view RedisReply::type_name() const noexcept {
    return to_string(type_);
}

std::string_view to_string(RedisReply::Type t) noexcept {
    switch (t) {
        case RedisReply::Type::Nil:
            return "Nil";
        case RedisReply::Type::String:
            return "String";
        case RedisReply::Type::Status:
            return "Status";
        case RedisReply::Type::Integer:
            return "Integer";
        case RedisReply::Type::Array:
            return "Array";
        case RedisReply::Type::Error:
            return "Error";
    }
    return "Unknown";
}

}  // namespace lockstep
