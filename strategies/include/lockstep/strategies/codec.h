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
        return nlohmann::json::parse(bytes.begin(), bytes.end()).template get<T>();
    }
};

}  // namespace lockstep
