#include "lockstep/cache/redis_time.h"

#include <charconv>
#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

long long time_field(const RedisReply& r) {
    const std::string& s = r.str();
    long long v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) throw ProtocolError("Redis TIME: a field is not a number");
    return v;
}

}  // namespace

std::chrono::system_clock::time_point redis_server_time(RedisClient& redis) {
    const RedisReply reply = redis.command({"TIME"});
    if (reply.type() != RedisReply::Type::Array || reply.elements().size() != 2) {
        throw ProtocolError("Redis TIME: expected two fields, got a " + std::string(reply.type_name()));
    }
    const auto since_epoch =
        std::chrono::seconds(time_field(reply.elements()[0])) + std::chrono::microseconds(time_field(reply.elements()[1]));
    return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch));
}

}  // namespace lockstep
