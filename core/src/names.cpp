#include "lockstep/core/names.h"

#include <cstdio>

#include "lockstep/core/error.h"

namespace lockstep {

bool is_name_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == ':' || c == '/';
}

namespace {

// The name as it may be printed: printable ASCII kept, every other byte as \xHH, at most 64 bytes
// of it (the error message is one line, whatever the name holds).
std::string printable(std::string_view name) {
    std::string out;
    for (std::size_t i = 0; i < name.size() && i < 64; ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c >= 0x20 && c < 0x7f && c != '\'') {
            out += static_cast<char>(c);
        } else {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
    }
    if (name.size() > 64) out += "...";
    return out;
}

}  // namespace

void check_name(std::string_view part, std::string_view name) {
    const std::string p(part);
    const char* const rule = "a name is 1 to 128 bytes of A-Z a-z 0-9 _ - . : / (docs/names.md)";
    if (name.empty()) throw ConfigError(p, std::string("must not be empty; ") + rule);
    if (name.size() > kMaxNameLength) {
        throw ConfigError(p, "'" + printable(name) + "' is " + std::to_string(name.size()) + " bytes long; " + rule);
    }
    for (std::size_t i = 0; i < name.size(); ++i) {
        if (!is_name_char(name[i])) {
            throw ConfigError(p, "'" + printable(name) + "': byte " + std::to_string(i) + " ('" +
                                     printable(name.substr(i, 1)) + "') is not allowed; " + rule);
        }
    }
}

}  // namespace lockstep
