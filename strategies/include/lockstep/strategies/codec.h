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

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
        const nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end());
        refuse_floats_in_integer_fields(j);
        return j.template get<T>();
    }

private:
    // nlohmann-json's from_json into an integer field static_casts a JSON float: undefined
    // behaviour when the float is out of the field's range (found by tests/fuzz/fuzz_cache_entry,
    // UBSan float-cast-overflow: "-1.3e25 is outside the range of ... 'long'"; an integer literal
    // beyond 64 bits is parsed as a float too). encode() writes integer fields as JSON integers,
    // so a large float where T keeps an integer is a corrupt entry: refused (std::out_of_range;
    // the repository treats it as a miss). Which fields are integers only T knows: when the entry
    // holds a float outside int32's range, T is decoded once from a copy with those floats set to
    // 0.0 (no conversion is undefined for 0.0) and encoded again; a float whose place comes back
    // as anything but a float (an integer) was headed for an integer field. A double field keeps
    // its large value (1e22 stays 1e22). Not covered: a negative float in an unsigned field.
    static void refuse_floats_in_integer_fields(const nlohmann::json& j) {
        constexpr double kLimit = 2147483648.0;  // 2^31: beyond it, a float overflows some integer field
        std::vector<nlohmann::json::json_pointer> suspects;
        std::vector<std::pair<const nlohmann::json*, nlohmann::json::json_pointer>> todo;
        todo.emplace_back(&j, nlohmann::json::json_pointer());
        while (!todo.empty()) {  // iterative: a deeply nested entry must not overflow the stack
            auto [node, at] = std::move(todo.back());
            todo.pop_back();
            if (node->is_number_float()) {
                const double v = node->template get<double>();
                if (!(v > -kLimit && v < kLimit)) suspects.push_back(at);
            } else if (node->is_object()) {
                for (const auto& [key, child] : node->items()) todo.emplace_back(&child, at / key);
            } else if (node->is_array()) {
                for (std::size_t i = 0; i < node->size(); ++i) todo.emplace_back(&(*node)[i], at / i);
            }
        }
        if (suspects.empty()) return;
        nlohmann::json probe = j;
        for (const auto& at : suspects) probe[at] = 0.0;
        const nlohmann::json again = probe.template get<T>();  // to_json(T) below: what encode() writes
        for (const auto& at : suspects) {
            if (!again.contains(at) || !again[at].is_number_float())
                throw std::out_of_range("JSON cache entry: the float at " + at.to_string() +
                                        " is out of range for the integer field it would be read into");
        }
    }
};

}  // namespace lockstep
