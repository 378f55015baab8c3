// Codec<T>: how a value of an entity is turned into the bytes of a cache entry and back.
// The default is JsonCodec<T> (nlohmann-json, through the type's to_json / from_json); replace
// it with anything (protobuf, a hand-written binary form) by implementing the two members.
//
// A codec's bytes are the payload of a cache entry (cache_entry.h); the repository adds the
// version in front. A payload that fails to decode is treated as a miss: the entry is deleted,
// logged and counted, never a crash.
//
// Thread safety: a codec is shared by every thread of a repository; both members must be safe
// to call concurrently (stateless codecs are).
#pragma once

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace lockstep {

template <class T>
class Codec {
public:
    virtual ~Codec() = default;
    virtual std::string encode(const T& value) const = 0;
    // Throws (any std::exception) when `bytes` is not a valid encoding.
    virtual T decode(std::string_view bytes) const = 0;
};

// True when T has nlohmann-json to_json / from_json (found by ADL or an adl_serializer).
template <class T>
concept JsonConvertible = requires(nlohmann::json& j, const nlohmann::json& cj, const T& value, T& out) {
    nlohmann::adl_serializer<T>::to_json(j, value);
    nlohmann::adl_serializer<T>::from_json(cj, out);
};

// JSON over nlohmann-json. Strings in T must be valid UTF-8 (nlohmann refuses others on encode
// with a json::type_error, which propagates: use a binary codec for binary fields).
template <class T>
    requires JsonConvertible<T>
class JsonCodec final : public Codec<T> {
public:
    std::string encode(const T& value) const override {
        nlohmann::json j = value;
        return j.dump();
    }
    T decode(std::string_view bytes) const override {
        refuse_integers_beyond_64_bits(bytes);
        return nlohmann::json::parse(bytes.begin(), bytes.end()).template get<T>();
    }

private:
    // nlohmann-json keeps an integer literal that fits neither int64 nor uint64 as a double, and
    // its from_json into an integer field then static_casts that double: undefined behaviour
    // (found by tests/fuzz/fuzz_cache_entry, UBSan float-cast-overflow). encode() never writes
    // such a literal, so an entry holding one is corrupt: refuse it (the repository treats it as
    // a miss). Literals with a fraction or an exponent are doubles by intent and are left alone.
    static void refuse_integers_beyond_64_bits(std::string_view bytes) {
        bool in_string = false;
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            const char c = bytes[i];
            if (in_string) {
                if (c == '\\') ++i;
                else if (c == '"') in_string = false;
                continue;
            }
            if (c == '"') {
                in_string = true;
                continue;
            }
            if (c != '-' && (c < '0' || c > '9')) continue;
            std::size_t end = i;
            bool integral = true;
            while (end < bytes.size() && std::string_view("+-0123456789.eE").find(bytes[end]) != std::string_view::npos) {
                if (bytes[end] == '.' || bytes[end] == 'e' || bytes[end] == 'E') integral = false;
                ++end;
            }
            const std::string_view token = bytes.substr(i, end - i);
            i = end - 1;
            if (!integral || token.size() < 19) continue;
            std::int64_t as_signed = 0;
            std::uint64_t as_unsigned = 0;
            const char* first = token.data();
            const char* last = token.data() + token.size();
            if (std::from_chars(first, last, as_signed).ec == std::errc{}) continue;
            if (std::from_chars(first, last, as_unsigned).ec == std::errc{}) continue;
            throw std::out_of_range("JSON cache entry: integer literal beyond 64 bits: " + std::string(token));
        }
    }
};

}  // namespace lockstep
