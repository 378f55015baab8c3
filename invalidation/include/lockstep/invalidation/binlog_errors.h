// Errors of the binlog decoder and follower, under lockstep's one error tree (core/error.h).
//
//   ProtocolError
//     BinlogDecodeError        the bytes are not a well-formed event (truncated, bad length,
//                              checksum mismatch): a corrupt stream, never a crash
//       UnsupportedColumnError a column type the decoder does not read (names table, column and
//                              type code): configure the table out, or extend the decoder
//
// Both are GiveUp: retrying the same bytes gives the same answer.
#pragma once

#include <string>

#include "lockstep/core/error.h"

namespace lockstep {

class BinlogDecodeError : public ProtocolError {
public:
    using ProtocolError::ProtocolError;
};

class UnsupportedColumnError : public BinlogDecodeError {
public:
    UnsupportedColumnError(const std::string& table, const std::string& column, int type_code)
        : BinlogDecodeError("binlog: column " + table + "." + column + " has type code " +
                            std::to_string(type_code) + ", which the row decoder does not support"),
          type_code_(type_code) {}
    int type_code() const noexcept { return type_code_; }

private:
    int type_code_;
};

}  // namespace lockstep
