// An existing schema adopted as it is (docs/tables.md): columns mapped by name, an
// AUTO_INCREMENT key, columns the database manages (DEFAULT, ON UPDATE CURRENT_TIMESTAMP,
// GENERATED), the entity checked against the live table at construction, entity names that
// would share keys refused, and fenced updates through the repository.
#include <gtest/gtest.h>

#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// An `accounts` table as a service might already have it.
struct Account {
    std::int64_t id = 0;
    std::string owner;
    std::string email;
    std::int64_t balance = 0;
    std::string updated_at;  // DB-managed: ON UPDATE CURRENT_TIMESTAMP(6)
    std::string tier;        // DB-managed: DEFAULT 'basic', never written by the repository
    std::int64_t doubled = 0;  // DB-managed: GENERATED ALWAYS AS (balance * 2)
};
void to_json(nlohmann::json& j, const Account& a) {
    j = {{"id", a.id}, {"owner", a.owner}, {"email", a.email}, {"balance", a.balance},
         {"updated_at", a.updated_at}, {"tier", a.tier}, {"doubled", a.doubled}};
}
void from_json(const nlohmann::json& j, Account& a) {
    a.id = j.at("id");
    a.owner = j.at("owner");
    a.email = j.at("email");
    a.balance = j.at("balance");
    a.updated_at = j.at("updated_at");
    a.tier = j.at("tier");
    a.doubled = j.at("doubled");
}

constexpr const char* kTable = "contract_accounts";

void create_accounts_table() {
    static bool done = [] {
        db().execute(R"sql(CREATE TABLE IF NOT EXISTS contract_accounts (
            id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            owner VARCHAR(64) NOT NULL,
            email VARCHAR(128) NOT NULL,
            balance BIGINT NOT NULL,
            tier VARCHAR(16) NOT NULL DEFAULT 'basic',
            updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
            doubled BIGINT AS (balance * 2) VIRTUAL,
            version BIGINT NOT NULL DEFAULT 0,
            fence BIGINT NOT NULL DEFAULT 0,
            loose_version BIGINT NULL,
            name_as_key VARCHAR(10) NOT NULL DEFAULT ''
        ) ENGINE=InnoDB)sql");
        return true;
    }();
    (void)done;
}

Entity<Account> account_entity() {
    Entity<Account> e;
    e.name = "contract_account";
    e.table = kTable;
    e.columns = {"owner", "email", "balance"};
    e.read_only_columns = {"updated_at", "tier", "doubled"};
    e.fence_column = "fence";
    e.from_row = [](const Row& r) {
        return Account{r.get<std::int64_t>("id"),      r.get<std::string>("owner"),
                       r.get<std::string>("email"),    r.get<std::int64_t>("balance"),
                       r.get<std::string>("updated_at"), r.get<std::string>("tier"),
                       r.get<std::int64_t>("doubled")};
    };
    e.to_columns = [](const Account& a) {
        return ColumnValues{{"owner", a.owner}, {"email", a.email}, {"balance", a.balance}};
    };
    e.id_of = [](const Account& a) { return a.id; };
    return e;
}

class TableContract : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override {
        create_accounts_table();
        options_.key_prefix = unique_key_prefix();
        options_.strategy = strategy_named(GetParam());
        options_.lock_mode = LockMode::Mutex;
        options_.lock_service = &lock_service();
    }
    void TearDown() override {
        for (auto id : ids_) db().execute("DELETE FROM contract_accounts WHERE id = ?", {id});
    }
    std::unique_ptr<CachedRepository<Account>> repo(Entity<Account> e = account_entity()) {
        return std::make_unique<CachedRepository<Account>>(std::move(e), db(), redis(), options_);
    }

    RepositoryOptions options_;
    std::vector<std::int64_t> ids_;
};

TEST_P(TableContract, InsertOnAutoIncrementReturnsTheIdAndWhatTheDatabaseStored) {
    auto r = repo();
    Account a = r->insert(Account{0, "ada", "ada@example.org", 100, "", "ignored", 0});
    ids_.push_back(a.id);
    EXPECT_GT(a.id, 0) << "the id the database chose";
    EXPECT_EQ(a.tier, "basic") << "a DB-managed column is never written: its default stands";
    EXPECT_EQ(a.doubled, 200) << "a generated column is read back";
    EXPECT_FALSE(a.updated_at.empty());
    auto again = r->get(a.id);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->owner, "ada");
    EXPECT_EQ(again->tier, "basic");
}

TEST_P(TableContract, UpdateReturnsWhatTheDatabaseStoredForEveryStrategy) {
    auto r = repo();
    Account a = r->insert(Account{0, "bob", "bob@example.org", 10, "", "", 0});
    ids_.push_back(a.id);
    db().execute("UPDATE contract_accounts SET updated_at = '2001-01-01 00:00:00' WHERE id = ?", {a.id});
    auto before = r->get(a.id);  // cached (or not) per strategy
    auto updated = r->update(a.id, [](Account& x) {
        x.balance = 25;
        x.tier = "gold";  // read-only: never written
        x.doubled = -1;   // read-only: never written
    });
    ASSERT_TRUE(updated);
    EXPECT_EQ(updated->balance, 25);
    EXPECT_EQ(updated->tier, "basic") << "what the database stored, not the in-memory value";
    EXPECT_EQ(updated->doubled, 50);
    EXPECT_NE(updated->updated_at.substr(0, 4), "2001") << "ON UPDATE CURRENT_TIMESTAMP moved";
    auto read = r->get(a.id);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->updated_at, updated->updated_at) << "a reader sees the same stored value";
    EXPECT_EQ(read->doubled, 50);
}

TEST_P(TableContract, ColumnsAreMappedByNameNeverByPosition) {
    auto e = account_entity();
    // The two string columns given in the "wrong" order land in the right columns.
    e.to_columns = [](const Account& a) {
        return ColumnValues{{"email", a.email}, {"balance", a.balance}, {"owner", a.owner}};
    };
    auto r = repo(e);
    Account a = r->insert(Account{0, "cy", "cy@example.org", 1, "", "", 0});
    ids_.push_back(a.id);
    EXPECT_EQ(a.owner, "cy");
    EXPECT_EQ(a.email, "cy@example.org");

    auto typo = account_entity();
    typo.to_columns = [](const Account& x) {
        return ColumnValues{{"owner", x.owner}, {"emial", x.email}, {"balance", x.balance}, {"owner", x.owner}};
    };
    auto bad = repo(typo);
    try {
        bad->update(a.id, [](Account& x) { x.balance = 2; });
        FAIL() << "expected ConfigError";
    } catch (const ConfigError& err) {
        const std::string what = err.what();
        EXPECT_NE(what.find("'owner' given twice"), std::string::npos) << what;
        EXPECT_NE(what.find("no value for 'email'"), std::string::npos) << what;
        EXPECT_NE(what.find("'emial' is not one of entity.columns"), std::string::npos) << what;
    }
    EXPECT_EQ(r->get(a.id)->balance, 1) << "nothing was written";
}

TEST_P(TableContract, FencedUpdateRefusesAStaleTokenAndBumpsTheVersionAndTheCache) {
    auto r = repo();
    Account a = r->insert(Account{0, "di", "di@example.org", 50, "", "", 0});
    ids_.push_back(a.id);
    ASSERT_EQ(r->get(a.id)->balance, 50);  // cached
    const auto v0 = r->get_versioned(a.id)->version;
    auto newer = r->update_fenced(a.id, 200, [](Account& x) { x.balance -= 5; });
    ASSERT_TRUE(newer);
    EXPECT_EQ(newer->balance, 45);
    auto again = r->update_fenced(a.id, 200, [](Account& x) { x.balance -= 5; });
    EXPECT_EQ(again->balance, 40) << "the same holder may write again";
    EXPECT_THROW(r->update_fenced(a.id, 100, [](Account& x) { x.balance = 0; }), ConflictError);
    auto row = db().query_one("SELECT balance, fence, version FROM contract_accounts WHERE id = ?", {a.id});
    EXPECT_EQ(row->get<std::int64_t>("balance"), 40) << "the stale write changed nothing";
    EXPECT_EQ(row->get<std::int64_t>("fence"), 200);
    EXPECT_GT(row->get<std::int64_t>("version"), v0) << "a fenced write bumps the version";
    ASSERT_TRUE(r->settle(10s));
    auto read = r->get_versioned(a.id);
    EXPECT_EQ(read->value.balance, 40) << "the cache step ran: no stale cached value";
    EXPECT_EQ(read->version, row->get<std::int64_t>("version"));
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, TableContract,
                         ::testing::Values("WriteThenDelete", "DelayedDoubleDelete:50", "TtlBounding:3000",
                                           "WriteThrough", "Lease"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             std::string n = info.param;
                             return n.substr(0, n.find(':'));
                         });

// ---- construction-time checks --------------------------------------------------------------

RepositoryOptions plain_options() {
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    return o;
}

TEST(TableContractCheck, EveryProblemOfTheEntityIsNamedInOneConfigError) {
    create_accounts_table();
    auto e = account_entity();
    e.columns = {"owner", "emial", "balance", "doubled"};  // a typo and a generated column
    e.read_only_columns = {"updated_at", "tierr"};
    e.version_column = "loose_version";                    // BIGINT NULL
    e.fence_column = "name_as_key";                        // VARCHAR
    try {
        CachedRepository<Account> r(e, db(), redis(), plain_options());
        FAIL() << "expected ConfigError";
    } catch (const ConfigError& err) {
        const std::string what = err.what();
        for (const char* needle : {"'emial' does not exist", "'doubled' is GENERATED", "'tierr' does not exist",
                                   "version column 'loose_version' is bigint NULL", "fence column 'name_as_key' is varchar"}) {
            EXPECT_NE(what.find(needle), std::string::npos) << needle << " in: " << what;
        }
    }
}

TEST(TableContractCheck, AMissingTableIsAConfigErrorAtConstruction) {
    auto e = account_entity();
    e.table = "no_such_table_anywhere";
    EXPECT_THROW(CachedRepository<Account>(e, db(), redis(), plain_options()), ConfigError);
}

TEST(TableContractCheck, AWarmCacheDoesNotHideATypo) {
    create_accounts_table();
    auto o = plain_options();
    auto good = std::make_unique<CachedRepository<Account>>(account_entity(), db(), redis(), o);
    Account a = good->insert(Account{0, "eve", "eve@example.org", 1, "", "", 0});
    ASSERT_TRUE(good->get(a.id));  // cached
    auto e = account_entity();
    e.columns = {"owner", "e_mail", "balance"};
    EXPECT_THROW(CachedRepository<Account>(e, db(), redis(), o), ConfigError);
    db().execute("DELETE FROM contract_accounts WHERE id = ?", {a.id});
}

TEST(TableContractCheck, TwoEntitiesWhoseNamesCollideInTheKeySpaceAreAConfigError) {
    create_accounts_table();
    auto o = plain_options();
    auto accounts = std::make_unique<CachedRepository<Account>>(account_entity(), db(), redis(), o);
    auto same = std::make_unique<CachedRepository<Account>>(account_entity(), db(), redis(), o);  // same table: fine
    Entity<Product> clash = product_entity();
    clash.name = "contract_account";  // the accounts' name, another table
    EXPECT_THROW(CachedRepository<Product>(clash, db(), redis(), o), ConfigError);
    auto other_prefix = plain_options();
    EXPECT_NO_THROW(CachedRepository<Product>(clash, db(), redis(), other_prefix)) << "another key prefix";
    accounts.reset();
    same.reset();
    EXPECT_NO_THROW(CachedRepository<Product>(clash, db(), redis(), o)) << "the name is free again";
}

}  // namespace
}  // namespace lockstep::test
