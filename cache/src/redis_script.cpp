#include "lockstep/cache/redis_script.h"

namespace lockstep {

RedisScript::RedisScript(std::string source) : source_(std::move(source)), sha1_(sha1_hex(source_)) {}

}  // namespace lockstep
