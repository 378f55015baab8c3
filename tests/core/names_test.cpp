// The one name rule (core/names.h) that lock names and entity names share.
#include <gtest/gtest.h>

#include <string>

#include "lockstep/core/error.h"
#include "lockstep/core/names.h"

namespace lockstep {
namespace {

TEST(Names, EveryAllowedCharacterAndTheLongestNameAreAccepted) {
    EXPECT_NO_THROW(check_name("lock name", "product:42"));
    EXPECT_NO_THROW(check_name("lock name", "jobs/nightly-report_v1.2"));
    EXPECT_NO_THROW(check_name("entity.name", "ABCxyz0123456789_-.:/"));
    EXPECT_NO_THROW(check_name("entity.name", std::string(kMaxNameLength, 'a')));
}

TEST(Names, BracesControlBytesSpacesNonAsciiAndLengthAreConfigErrorsOnOneLine) {
    for (const std::string& bad : {std::string(""), std::string("a{b"), std::string("b}"), std::string("a\0b", 3),
                                   std::string("a\nb"), std::string("a\rb"), std::string("a b"), std::string("a\tb"),
                                   std::string("caf\xc3\xa9"), std::string("a#b"), std::string("a%b"), std::string("a'b"),
                                   std::string(kMaxNameLength + 1, 'x')}) {
        try {
            check_name("lock name", bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), "lock name");
            const std::string what = e.what();
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            EXPECT_EQ(what.find('\0'), std::string::npos) << what;
            EXPECT_NE(what.find("docs/names.md"), std::string::npos) << what;
        }
    }
}

}  // namespace
}  // namespace lockstep
