// The migration runner on this backend: library API and `sqllock migrate --dir` processes.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "sqllock/migrations.hpp"
#include "story_fixture.hpp"

namespace stories {
namespace {

using namespace std::chrono_literals;

/// Holds up `c`'s deadline thread (a lease of 100 ms whose on_lost blocks, as a descheduled thread
/// would be late) until destroyed, at most 10 s: loss reports of `c` wait meanwhile.
class deadline_thread_stall {
 public:
  explicit deadline_thread_stall(sqllock::client& c)
      : guard_(c.try_acquire(unique_name("deadline_stall"),
                             {.ttl = 100ms, .auto_renew = false,
                              .on_lost = [held = held_, go = go_](const std::string&, std::int64_t) {
                                *held = true;
                                const auto until = std::chrono::steady_clock::now() + 10s;
                                while (!*go && std::chrono::steady_clock::now() < until)
                                  std::this_thread::sleep_for(5ms);
                              }})) {}
  ~deadline_thread_stall() { *go_ = true; }
  deadline_thread_stall(const deadline_thread_stall&) = delete;
  deadline_thread_stall& operator=(const deadline_thread_stall&) = delete;
  /// Whether the deadline thread is held up (waited for, up to 3 s).
  bool holding() const {
    return guard_ && sqllock_testing::eventually([&] { return held_->load(); }, 3s);
  }

 private:
  std::shared_ptr<std::atomic<bool>> held_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> go_ = std::make_shared<std::atomic<bool>>(false);
  std::optional<sqllock::lease_guard> guard_;
};
using sqllock::migrate_options;

bool is_mysql() { return backend().name == "mysql"; }

migrate_options options_for(const std::string& history) {
  migrate_options o;
  o.history_table = history;
  o.wait = 30s;
  o.lock_ttl = 3s;
  return o;
}

std::string create_table(const std::string& name) {
  return "CREATE TABLE " + name + " (id INTEGER PRIMARY KEY, note VARCHAR(100));\n";
}

/// The set-up of the lease tests below: writes two migrations into `dir` (0001_a.sql and
/// 0002_b.sql, each creating a table of its own) and returns options with a history table of
/// their own.
migrate_options two_migrations_in(const temp_dir& dir) {
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  dir.write("0002_b.sql", create_table(unique_name("m_b")));
  return options_for(unique_name("hist"));
}

/// The name of the lease a run with options `o` holds.
std::string migration_lease(const migrate_options& o) { return "sqllock:migrations:" + o.history_table; }

std::vector<std::int64_t> versions(const std::vector<sqllock::migration_record>& rows) {
  std::vector<std::int64_t> v;
  for (const auto& r : rows) v.push_back(r.version);
  return v;
}

TEST(Migrate, AppliesPendingFilesInOrderAndRecordsHistory) {
  auto c = make_client();
  temp_dir dir;
  const auto a = unique_name("m_a"), b = unique_name("m_b"), cc = unique_name("m_c");
  dir.write("0001_create_a.sql", "-- first; with a semicolon in a comment\n" + create_table(a));
  dir.write("0002_fill_a.sql",
            "INSERT INTO " + a + " VALUES (1, 'x;y');\nINSERT INTO " + a + " VALUES (2, 'it''s');\n");
  dir.write("README.md", "not a migration");
  dir.write("notes.sql", "not a migration either (no version)");
  auto o = options_for(unique_name("hist"));

  auto r1 = sqllock::migrate_directory(c, dir.path(), o);
  ASSERT_EQ(r1.applied.size(), 2u);
  EXPECT_EQ(r1.applied[0].name, "0001_create_a.sql");
  EXPECT_EQ(r1.current_version, 2);
  EXPECT_GT(r1.fencing_token, 0);
  EXPECT_EQ(query(c, "SELECT COUNT(*) FROM " + a).at(0).as_int(0), 2);
  EXPECT_EQ(query(c, "SELECT note FROM " + a + " WHERE id = 1").at(0).as_text(0), "x;y");

  auto hist = sqllock::migration_history(c, o);
  ASSERT_EQ(versions(hist), (std::vector<std::int64_t>{1, 2}));
  std::ifstream in(dir.path() / "0002_fill_a.sql", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(hist[1].checksum, sqllock::sha256_hex(text));
  EXPECT_EQ(hist[1].status, "applied");
  EXPECT_EQ(hist[1].name, "0002_fill_a.sql");
  EXPECT_EQ(hist[1].applied_by, c.holder_id());
  EXPECT_FALSE(hist[1].applied_at.empty());
  EXPECT_GE(hist[1].duration_ms, 0);

  // Again: nothing to do. Then a new file: only it runs.
  EXPECT_TRUE(sqllock::migrate_directory(c, dir.path(), o).applied.empty());
  dir.write("0010_create_b_c.sql", create_table(b) + create_table(cc));
  auto r3 = sqllock::migrate_directory(c, dir.path(), o);
  ASSERT_EQ(r3.applied.size(), 1u);
  EXPECT_EQ(r3.applied[0].version, 10);
  EXPECT_TRUE(table_exists(c, b));
  EXPECT_TRUE(table_exists(c, cc));
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2, 10}));
}

TEST(Migrate, ChecksumMismatchStopsNamingTheFile) {
  auto c = make_client();
  temp_dir dir;
  const auto a = unique_name("m_a"), b = unique_name("m_b");
  dir.write("0001_a.sql", create_table(a));
  auto o = options_for(unique_name("hist"));
  sqllock::migrate_directory(c, dir.path(), o);
  dir.write("0001_a.sql", create_table(a) + "-- edited afterwards\n");
  dir.write("0002_b.sql", create_table(b));
  try {
    sqllock::migrate_directory(c, dir.path(), o);
    FAIL() << "no checksum_mismatch";
  } catch (const sqllock::checksum_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("0001_a.sql"), std::string::npos) << e.what();
    EXPECT_EQ(e.file(), "0001_a.sql");
    EXPECT_EQ(e.version(), 1);
  }
  EXPECT_FALSE(table_exists(c, b)) << "nothing after a mismatch may run";
}

TEST(Migrate, RemovedFileIsReportedOrRefused) {
  auto c = make_client();
  temp_dir dir;
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  dir.write("0002_b.sql", create_table(unique_name("m_b")));
  auto o = options_for(unique_name("hist"));
  sqllock::migrate_directory(c, dir.path(), o);
  std::filesystem::remove(dir.path() / "0001_a.sql");
  auto r = sqllock::migrate_directory(c, dir.path(), o);
  EXPECT_EQ(r.missing_files, (std::vector<std::string>{"0001_a.sql"}));
  EXPECT_TRUE(r.applied.empty());
  o.fail_on_missing_files = true;
  EXPECT_THROW(sqllock::migrate_directory(c, dir.path(), o), sqllock::migration_failed);
}

TEST(Migrate, OutOfOrderFileIsRefused) {
  auto c = make_client();
  temp_dir dir;
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  dir.write("0003_c.sql", create_table(unique_name("m_c")));
  auto o = options_for(unique_name("hist"));
  sqllock::migrate_directory(c, dir.path(), o);
  dir.write("0002_b.sql", create_table(unique_name("m_b")));
  try {
    sqllock::migrate_directory(c, dir.path(), o);
    FAIL() << "no error";
  } catch (const sqllock::migration_failed& e) {
    EXPECT_EQ(e.file(), "0002_b.sql");
  }
}

TEST(Migrate, BadFilesAndNamesAreInvalidArguments) {
  auto c = make_client();
  {
    temp_dir dir;
    dir.write("01_a.sql", "SELECT 1");
    dir.write("1_b.sql", "SELECT 1");
    EXPECT_THROW(sqllock::read_migration_directory(dir.path()), sqllock::invalid_argument);
  }
  {
    temp_dir dir;
    dir.write("0001-a.sql", "SELECT 1");
    EXPECT_THROW(sqllock::read_migration_directory(dir.path()), sqllock::invalid_argument);
  }
  {
    temp_dir dir;
    dir.write("0000_a.sql", "SELECT 1");
    EXPECT_THROW(sqllock::read_migration_directory(dir.path()), sqllock::invalid_argument);
  }
  EXPECT_THROW(sqllock::read_migration_directory("/nonexistent/dir"), sqllock::invalid_argument);
  {
    // A bare `?` would be a bind placeholder: refused up front, naming the file and statement.
    temp_dir q_dir;
    q_dir.write("0001_q.sql", "SELECT 'what?' /* ? */;\nSELECT 1 WHERE 1 = ?;\n");
    try {
      sqllock::migrate_directory(c, q_dir.path(), options_for(unique_name("hist")));
      FAIL() << "no error";
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("0001_q.sql, statement 2"), std::string::npos) << e.what();
    }
  }
  if (current_dialect() != sqllock::dialect::mysql) {
    // Each file already runs in one transaction: transaction control inside it is refused.
    temp_dir tx_dir;
    const auto t = unique_name("m_t");
    tx_dir.write("0001_a.sql", "/* wrapped */ BEGIN;\n" + create_table(t) + "COMMIT;\n");
    try {
      sqllock::migrate_directory(c, tx_dir.path(), options_for(unique_name("hist")));
      FAIL() << "no error";
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("0001_a.sql"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(table_exists(c, t));
  }
  temp_dir dir;
  migrate_options o;
  o.history_table = "bad name; DROP TABLE x";
  EXPECT_THROW(sqllock::migrate_directory(c, dir.path(), o), sqllock::invalid_argument);
  {
    temp_dir bad;
    bad.write("0001_a.sql", "SELECT 'unterminated");
    try {
      sqllock::migrate_directory(c, bad.path(), options_for(unique_name("hist")));
      FAIL() << "no error";
    } catch (const sqllock::error& e) {
      EXPECT_NE(std::string(e.what()).find("0001_a.sql"), std::string::npos) << e.what();
    }
  }
}

// PostgreSQL nests block comments: a transaction statement behind `/* a /* b */ c */` was taken
// for one starting with `*` and let through; its COMMIT committed the history row and the
// statements before it, and the run then reported a failure of the rest as "nothing of it was
// applied (rolled back)" with the version recorded as applied. Only PostgreSQL nests comments.
TEST(MigratePostgreSqlOnly, ATransactionStatementBehindANestedCommentIsRefused) {
  auto c = make_client();
  temp_dir dir;
  const auto t = unique_name("m_t");
  dir.write("0001_a.sql", create_table(t) + "/* outer /* inner */ still the comment */ COMMIT;\n" +
                              "SELECT no_such_column FROM " + t + ";\n");
  auto o = options_for(unique_name("hist"));
  try {
    sqllock::migrate_directory(c, dir.path(), o);
    FAIL() << "no error";
  } catch (const sqllock::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("0001_a.sql"), std::string::npos) << e.what();
  } catch (const sqllock::error& e) {
    ADD_FAILURE() << "not refused up front: " << e.what();
  }
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), std::vector<std::int64_t>{})
      << "the migration failed but its version is recorded as applied";
  EXPECT_FALSE(table_exists(c, t)) << "part of a failed migration was committed";
}

// PostgreSQL/SQLite: a failing statement rolls the whole migration back, history included.
// MySQL: the failure is recorded, the runner refuses to go on, and resolve lets it continue.
TEST(Migrate, FailedMigration) {
  auto c = make_client();
  temp_dir dir;
  const auto a = unique_name("m_a"), b = unique_name("m_b"), d = unique_name("m_d");
  dir.write("0001_a.sql", create_table(a));
  dir.write("0002_b.sql", create_table(b) + "INSERT INTO no_such_table_" + b + " VALUES (1);\n");
  dir.write("0003_d.sql", create_table(d));
  auto o = options_for(unique_name("hist"));
  try {
    sqllock::migrate_directory(c, dir.path(), o);
    FAIL() << "no error";
  } catch (const sqllock::migration_failed& e) {
    EXPECT_EQ(e.version(), 2);
    EXPECT_EQ(e.file(), "0002_b.sql");
  }
  EXPECT_TRUE(table_exists(c, a));
  EXPECT_FALSE(table_exists(c, d));
  auto hist = sqllock::migration_history(c, o);
  if (!is_mysql()) {
    EXPECT_FALSE(table_exists(c, b)) << "half of migration 2 is visible";
    EXPECT_EQ(versions(hist), (std::vector<std::int64_t>{1}));
    dir.write("0002_b.sql", create_table(b));
    auto r = sqllock::migrate_directory(c, dir.path(), o);
    EXPECT_EQ(versions(r.applied), (std::vector<std::int64_t>{2, 3}));
    EXPECT_THROW(sqllock::resolve_migration(c, dir.path(), 2, sqllock::migration_resolution::applied, o),
                 sqllock::migration_failed);
    return;
  }
  ASSERT_EQ(versions(hist), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(hist[1].status, "failed");
  EXPECT_NE(hist[1].error.find("1146"), std::string::npos) << hist[1].error;  // table does not exist
  EXPECT_TRUE(table_exists(c, b)) << "MySQL commits DDL at once";
  try {
    sqllock::migrate_directory(c, dir.path(), o);
    FAIL() << "went past a failed migration";
  } catch (const sqllock::migration_failed& e) {
    EXPECT_NE(std::string(e.what()).find("--resolve 2"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(table_exists(c, d));
  // The human finishes the change by hand and fixes the file, then resolves.
  exec(c, "CREATE TABLE no_such_table_" + b + " (x INT)");
  exec(c, "INSERT INTO no_such_table_" + b + " VALUES (1)");
  dir.write("0002_b.sql", create_table(b) + "CREATE TABLE no_such_table_" + b +
                              " (x INT);\nINSERT INTO no_such_table_" + b + " VALUES (1);\n");
  auto rec = sqllock::resolve_migration(c, dir.path(), 2, sqllock::migration_resolution::applied, o);
  EXPECT_EQ(rec.status, "resolved");
  auto r = sqllock::migrate_directory(c, dir.path(), o);
  EXPECT_EQ(versions(r.applied), (std::vector<std::int64_t>{3}));
  EXPECT_TRUE(table_exists(c, d));
  hist = sqllock::migration_history(c, o);
  EXPECT_EQ(hist[1].status, "resolved");
}

TEST(Migrate, RetryResolutionForgetsTheFailedRow) {
  auto c = make_client();
  temp_dir dir;
  const auto b = unique_name("m_b");
  dir.write("0001_b.sql", "CREATE TABLE " + b + " (id INT);\nSELECT * FROM nothing_" + b + ";\n");
  auto o = options_for(unique_name("hist"));
  EXPECT_THROW(sqllock::migrate_directory(c, dir.path(), o), sqllock::migration_failed);
  if (!is_mysql()) {
    // Rolled back, nothing recorded: there is nothing to resolve, and a fixed file simply runs.
    EXPECT_THROW(sqllock::resolve_migration(c, dir.path(), 1, sqllock::migration_resolution::retry, o),
                 sqllock::migration_failed);
    EXPECT_FALSE(table_exists(c, b));
    dir.write("0001_b.sql", "CREATE TABLE " + b + " (id INT);\n");
    EXPECT_EQ(sqllock::migrate_directory(c, dir.path(), o).applied.size(), 1u);
    return;
  }
  exec(c, "DROP TABLE " + b);  // the human undoes the partial effect
  dir.write("0001_b.sql", "CREATE TABLE " + b + " (id INT);\n");
  sqllock::resolve_migration(c, dir.path(), 1, sqllock::migration_resolution::retry, o);
  auto r = sqllock::migrate_directory(c, dir.path(), o);
  EXPECT_EQ(versions(r.applied), (std::vector<std::int64_t>{1}));
}

// Each dialect's statements with semicolons inside bodies run end to end through the splitter.
TEST(Migrate, BodiesWithSemicolonsRunWhole) {
  auto c = make_client();
  temp_dir dir;
  const auto t = unique_name("m_t"), hook = unique_name("m_h");
  std::string body;
  switch (current_dialect()) {
    case sqllock::dialect::postgresql:
      body = "CREATE FUNCTION " + hook +
             "() RETURNS trigger LANGUAGE plpgsql AS $fn$\n"
             "BEGIN\n  NEW.note := NEW.note || ';checked';\n  RETURN NEW;\nEND\n$fn$;\n"
             "CREATE TRIGGER " +
             hook + " BEFORE INSERT ON " + t + " FOR EACH ROW EXECUTE FUNCTION " + hook + "();\n";
      break;
    case sqllock::dialect::mysql:
      body =
          "DELIMITER //\n"
          "CREATE TRIGGER " +
          hook + " BEFORE INSERT ON " + t +
          " FOR EACH ROW\n"
          "BEGIN\n  SET NEW.note = CONCAT(NEW.note, ';checked');\nEND//\n"
          "DELIMITER ;\n";
      break;
    case sqllock::dialect::sqlite:
      body = "CREATE TRIGGER " + hook + " AFTER INSERT ON " + t +
             " BEGIN\n"
             "  UPDATE " +
             t + " SET note = note || ';checked' WHERE id = NEW.id;\nEND;\n";
      break;
  }
  dir.write("0001_t.sql", create_table(t) + body + "INSERT INTO " + t + " VALUES (1, 'a;b');\n");
  auto r = sqllock::migrate_directory(c, dir.path(), options_for(unique_name("hist")));
  ASSERT_EQ(r.applied.size(), 1u);
  EXPECT_EQ(query(c, "SELECT note FROM " + t + " WHERE id = 1").at(0).as_text(0), "a;b;checked");
}

// A migration longer than the lease TTL: the watchdog keeps the lease on the servers; on SQLite
// the migration's write lock keeps the watchdog from renewing, so the lease expires, and the runner
// takes it again and goes on (nobody else could write meanwhile).
TEST(Migrate, MigrationLongerThanTheLeaseTtl) {
  auto c = make_client();
  temp_dir dir;
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  dir.write("0002_b.sql", create_table(unique_name("m_b")));
  dir.write("0003_c.sql", create_table(unique_name("m_c")));
  auto o = options_for(unique_name("hist"));
  o.lock_ttl = 300ms;
  o.before_commit = [](std::int64_t version) {
    if (version == 2) std::this_thread::sleep_for(1200ms);
  };
  auto r = sqllock::migrate_directory(c, dir.path(), o);
  EXPECT_EQ(versions(r.applied), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2, 3}));
}

// PostgreSQL runs each migration in one transaction and checks the lease right before its commit
// (once the lease is lost another migrator may be running). That check was lease.lost(), which
// stays false until the client's deadline thread reports the loss; with that thread late (held up
// here by another lease's blocking on_lost, as a descheduled thread would be) a lease past its
// loss point passed and the migration committed on it. The check is usable(): the migration is
// rolled back and applied again on a new lease.
// Only PostgreSQL checks the lease before a migration's commit: the suite's name keeps it out of
// the other backends' programs (run_stories).
TEST(MigratePostgreSqlOnly, CommitsNoMigrationOnALeasePastItsLossPointWhileTheLossIsUnreported) {
  auto c = make_client();
  auto blocker = make_client();
  deadline_thread_stall stall(c);
  ASSERT_TRUE(stall.holding()) << "the deadline thread was never held up";

  temp_dir dir;
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  auto o = options_for(unique_name("hist"));
  o.lock_ttl = 600ms;
  int starts = 0;
  bool blocked = false;
  o.on_start = [&](std::int64_t, const std::string&) { ++starts; };
  o.before_commit = [&](std::int64_t) {
    if (blocked) return;
    blocked = true;
    // Another session locks the lease's row: the watchdog's renewal waits on it until its
    // deadline, the lease's loss point, and fails; 900 ms later the lease is past that point.
    // (FOR NO KEY UPDATE: it stops renewals, not the migration's own FOR KEY SHARE guard.)
    auto tx = blocker.begin();
    tx.query("SELECT name FROM sqllock_locks WHERE name = ? FOR NO KEY UPDATE",
             {std::string("sqllock:migrations:") + o.history_table});
    std::this_thread::sleep_for(900ms);
    tx.rollback();
  };
  auto r = sqllock::migrate_directory(c, dir.path(), o);
  EXPECT_EQ(versions(r.applied), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(starts, 2) << "version 1 was committed on a lease past its loss point";
}

// Between migrations the runner checked lease.lost(), which stays false until the client's
// deadline thread reports the loss: with that thread late (held up as above) the next migration
// started on a lease past its loss point, which another migrator could hold by then (on MySQL its
// DDL commits at once; another migrator finds it "running" and is told its migrator died). A
// migration starts only on a lease nobody else can take: here a probe client tries to take the
// lease as each migration starts.
TEST(Migrate, StartsNoMigrationOnALeasePastItsLossPointWhileTheLossIsUnreported) {
  auto c = make_client();
  auto blocker = make_client();
  auto probe = make_client();
  deadline_thread_stall stall(c);
  ASSERT_TRUE(stall.holding()) << "the deadline thread was never held up";

  temp_dir dir;
  auto o = two_migrations_in(dir);
  const std::string lease = migration_lease(o);
  o.lock_ttl = 600ms;
  std::vector<std::int64_t> started_on_a_free_lease;
  o.on_start = [&](std::int64_t version, const std::string&) {
    if (auto other = probe.try_acquire(lease, {.ttl = 1s, .auto_renew = false})) {
      started_on_a_free_lease.push_back(version);
      other->release();
    }
  };
  bool blocked = false;
  o.before_commit = [&](std::int64_t) {
    if (blocked) return;
    blocked = true;
    if (backend().name == "sqlite") {
      // The migration's write lock keeps the watchdog from renewing.
      std::this_thread::sleep_for(900ms);
      return;
    }
    // Another session locks the lease's row: the renewals wait on it until their deadline (the
    // lease's loss point) and fail; 900 ms later the lease is past that point. PostgreSQL: FOR NO
    // KEY UPDATE stops renewals, not the migration's own FOR KEY SHARE guard.
    auto tx = blocker.begin();
    tx.query(std::string("SELECT name FROM sqllock_locks WHERE name = ? ") +
                 (backend().name == "postgresql" ? "FOR NO KEY UPDATE" : "FOR UPDATE"),
             {lease});
    std::this_thread::sleep_for(900ms);
    tx.rollback();
  };
  try {
    sqllock::migrate_directory(c, dir.path(), o);
  } catch (const sqllock::lease_lost& e) {
    ADD_FAILURE() << "the run went on with a lost lease: " << e.what();
  }
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(started_on_a_free_lease, std::vector<std::int64_t>{})
      << "a migration started on a lease another migrator could take";
}

// A migration's lease lost after its start was decided (a pause before its first statement, here
// in on_start) and taken over by another migrator: the migration's statements ran anyway, while the
// other held the lease (MySQL: its DDL committed at once; PostgreSQL: rolled back only by the check
// before its commit). Each migration's first transaction now checks the lease on the database and
// keeps its row locked (transaction::require_lease), so it runs only while the lease is held.
TEST(Migrate, RunsNoMigrationStatementWhileAnotherMigratorHoldsTheLease) {
  auto c = make_client();
  auto blocker = make_client();
  auto other = make_client();
  temp_dir dir;
  auto o = two_migrations_in(dir);
  const std::string lease = migration_lease(o);
  o.lock_ttl = 600ms;
  std::optional<sqllock::lease_guard> taken;
  std::atomic<bool> other_holds{false};
  std::thread releaser;
  o.on_start = [&](std::int64_t version, const std::string&) {
    if (version != 2 || taken) return;
    // Another session keeps the lease's renewals from applying (the row locked; SQLite: the write
    // lock) until the lease is past its loss point; then another migrator takes it over.
    {
      auto tx = blocker.begin();
      tx.query(std::string("SELECT name FROM sqllock_locks WHERE name = ?") +
                   (backend().name == "sqlite" ? "" : " FOR UPDATE"),
               {lease});
      std::this_thread::sleep_for(900ms);
      tx.rollback();
    }
    try {
      taken = other.acquire_for(lease, 3s, {.ttl = 30s});  // SQLite: past a renewal's write lock
    } catch (const sqllock::acquire_timeout&) {
      ADD_FAILURE() << "the expired migration lease could not be taken over";
      return;
    }
    other_holds = true;
    releaser = std::thread([&] {
      std::this_thread::sleep_for(1s);
      other_holds = false;
      taken->release();
    });
  };
  std::vector<std::int64_t> ran_while_other_held;
  o.before_commit = [&](std::int64_t version) {
    if (other_holds) ran_while_other_held.push_back(version);
  };
  try {
    sqllock::migrate_directory(c, dir.path(), o);
  } catch (const sqllock::error& e) {
    ADD_FAILURE() << "the run failed: " << e.what();
  }
  if (releaser.joinable()) releaser.join();
  EXPECT_TRUE(taken.has_value());
  EXPECT_EQ(ran_while_other_held, std::vector<std::int64_t>{})
      << "a migration's statements ran while another migrator held the lease";
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2}));
}

// Every migration applied and recorded, then the lease found gone on the final release (expired
// and taken over, or force-released, after the last migration's statements ran): the run threw
// lease_lost ("lost between migrations; run again"), and `sqllock migrate` exited 69, although
// everything was applied. The run reports what it applied; the lease is gone either way.
// The lease is force-released inside the last migration (before_commit) by another client; the
// migration commits (PostgreSQL's check before the commit is local: the loss is not known yet) and
// the release then fails its owner check, as after a takeover past the commit. SQLite: the
// migration's write lock keeps every other writer out until it commits (hence *ServersOnly).
TEST(MigrateServersOnly, AFullyAppliedRunWhoseLeaseIsGoneAtItsReleaseReportsWhatItApplied) {
  auto c = make_client();
  auto admin = make_client();
  temp_dir dir;
  auto o = two_migrations_in(dir);
  const std::string lease = migration_lease(o);
  bool forced = false;
  o.before_commit = [&](std::int64_t version) {
    if (version == 2) forced = admin.force_release(lease);
  };
  try {
    auto r = sqllock::migrate_directory(c, dir.path(), o);
    EXPECT_EQ(versions(r.applied), (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(r.current_version, 2);
  } catch (const sqllock::error& e) {
    ADD_FAILURE() << "every migration was applied, yet the run threw: " << e.what();
  }
  EXPECT_TRUE(forced) << "the lease was not held during the last migration";
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2}));
}

// resolve_migration changed the history row in a transaction that did not check the lease: with
// its lease gone meanwhile (here force-released while the resolution waited for a row lock on the
// history row) and another migrator holding it, the resolution committed anyway, under the other
// migrator's feet. Like a migration's first transaction, it is now guarded (require_lease): a
// takeover waits for it, or it is refused. The other migrator must see the history unchanged for as
// long as it holds the lease. An interrupted ("running") row is written by hand, as a migrator dead
// on MySQL leaves it (PostgreSQL rolls a migration back, but resolve takes the same path).
// SQLite: the resolution's write lock keeps everyone out (hence *ServersOnly).
TEST(MigrateServersOnly, ResolveChangesNoHistoryWhileAnotherMigratorHoldsTheLease) {
  auto c = make_client();
  auto blocker = make_client();
  auto admin = make_client();
  auto other = make_client();
  temp_dir dir;
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  auto o = options_for(unique_name("hist"));
  sqllock::migrate_directory(c, dir.path(), o);
  exec(c, "INSERT INTO " + o.history_table +
              " (version, name, checksum, status, duration_ms, applied_by) VALUES (2, '0002_b.sql', ?, 'running', 0, 'dead')",
       {std::string(64, '0')});
  const std::string lease = "sqllock:migrations:" + o.history_table;
  const auto row_2 = [&] {
    return query(other, "SELECT COUNT(*) FROM " + o.history_table + " WHERE version = 2 AND status = 'running'")
        .at(0)
        .as_int(0);
  };

  // The history row is locked: the resolution's DELETE waits for it.
  auto held_row = blocker.begin();
  held_row.query("SELECT version FROM " + o.history_table + " WHERE version = 2 FOR UPDATE");
  std::thread resolver([&] {
    try {
      sqllock::resolve_migration(c, dir.path(), 2, sqllock::migration_resolution::retry, o);
    } catch (const sqllock::error&) {
      // refused (lease_lost) or its final release found the lease gone: the history tells
    }
  });
  ASSERT_TRUE(sqllock_testing::eventually(
      [&] {
        auto row = other.inspect(lease);
        return row && row->holder == c.holder_id();
      },
      5s))
      << "the resolution never took the migration lease";
  std::this_thread::sleep_for(300ms);  // the resolution reaches its DELETE
  // The lease is force-released and another migrator takes it (on a thread: a guard makes it wait).
  std::optional<sqllock::lease_guard> taken;
  std::int64_t running_when_taken = -1;
  std::thread taker([&] {
    admin.force_release(lease);
    taken = other.acquire_for(lease, 20s, {.ttl = 30s});
    running_when_taken = row_2();
  });
  std::this_thread::sleep_for(500ms);
  held_row.rollback();
  resolver.join();
  taker.join();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(row_2(), running_when_taken)
      << "the history changed while another migrator held the lease (1: row 2 was 'running' when it took "
         "the lease)";
  taken->release();
}

// ---- through the command ----

std::vector<std::string> migrate_args(const temp_dir& dir, const std::string& history, const std::string& ttl = "3s") {
  return {"migrate", "--dir", dir.path().string(), "--history-table", history, "--lock-ttl", ttl, "--wait", "60s"};
}

TEST(MigrateCommand, FourProcessesApplyEachMigrationOnceInOrder) {
  auto c = make_client();
  temp_dir dir;
  const auto log = unique_name("m_log");
  const auto history = unique_name("hist");
  dir.write("0001_log.sql", "CREATE TABLE " + log +
                                " (v INTEGER PRIMARY KEY, pos INTEGER NOT NULL);\n"
                                "INSERT INTO " +
                                log + " (v, pos) SELECT 1, COUNT(*) FROM " + log + ";\n");
  for (int v = 2; v <= 6; ++v) {
    char name[32];
    std::snprintf(name, sizeof name, "%04d_step.sql", v);
    dir.write(name, create_table(unique_name("m_t")) + "INSERT INTO " + log + " (v, pos) SELECT " + std::to_string(v) +
                        ", COUNT(*) FROM " + log + ";\n");
  }
  std::vector<std::unique_ptr<cli_process>> procs;
  for (int i = 0; i < 4; ++i) {
    auto args = migrate_args(dir, history);
    args.push_back("--url");
    args.push_back(backend().url);
    procs.push_back(std::make_unique<cli_process>(args));
  }
  int applied_lines = 0;
  for (auto& p : procs) {
    auto r = p->wait();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (std::size_t pos = 0; (pos = r.out.find("applied 000", pos)) != std::string::npos; ++pos) ++applied_lines;
  }
  EXPECT_EQ(applied_lines, 6) << "every migration reported applied by exactly one process";
  auto rows = query(c, "SELECT v, pos FROM " + log + " ORDER BY v");
  ASSERT_EQ(rows.size(), 6u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].as_int(0), static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(rows[i].as_int(1), static_cast<std::int64_t>(i)) << "migration " << i + 1 << " ran out of order";
  }
  EXPECT_EQ(versions(sqllock::migration_history(c, options_for(history))),
            (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}));
}

/// What a `migrate --dir` run printed shows: each of `files` applied, in that order, then the
/// version reached and how many it applied now.
void expect_reported_applied(const process_result& r, const std::vector<std::string>& files, int version) {
  std::size_t at = 0;
  for (const auto& f : files) {
    const auto found = r.out.find("applied " + f + " (", at);
    ASSERT_NE(found, std::string::npos) << f << " not reported applied (in order): " << r.out;
    at = found + 1;
  }
  EXPECT_NE(r.out.find("migrations at version " + std::to_string(version) + " (" + std::to_string(files.size()) +
                       " applied now)"),
            std::string::npos)
      << r.out;
}

// A fully applied run exits 0 and prints each migration it applied, in order, and the version
// reached; run again, it applies nothing, says so and exits 0.
TEST(MigrateCommand, AFullyAppliedRunExits0AndPrintsWhatItApplied) {
  temp_dir dir;
  const auto o = two_migrations_in(dir);
  const auto r = run_cli(migrate_args(dir, o.history_table));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_reported_applied(r, {"0001_a.sql", "0002_b.sql"}, 2);
  auto c = make_client();
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2}));
  const auto again = run_cli(migrate_args(dir, o.history_table));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out.find("applied 0"), std::string::npos) << again.out;
  expect_reported_applied(again, {}, 2);
}

// The command's side of MigrateServersOnly.AFullyAppliedRunWhoseLeaseIsGoneAtItsReleaseReportsWhatItApplied:
// the migration lease is freed inside the last migration (its own statement clears the lease's
// owner in the lock table, as a force release does), so the run's final release fails its owner
// check after every migration committed. The run exits 0 and prints what it applied.
TEST(MigrateCommandServersOnly, AFullyAppliedRunWhoseLeaseIsGoneAtItsReleaseExits0AndPrintsWhatItApplied) {
  temp_dir dir;
  const auto history = unique_name("hist");
  const auto o = options_for(history);
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  dir.write("0002_frees_the_lease.sql", "UPDATE sqllock_locks SET holder_id = NULL, owner = NULL, hold_count = 0 "
                                        "WHERE name = '" + migration_lease(o) + "';\n");
  const auto r = run_cli(migrate_args(dir, history));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_reported_applied(r, {"0001_a.sql", "0002_frees_the_lease.sql"}, 2);
  auto c = make_client();
  EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2}));
  EXPECT_FALSE(c.inspect(migration_lease(o)).has_value()) << "the lease was not freed by the last migration";
}

TEST(MigrateCommand, KilledMigratorLeavesNoStuckLockAndNoHalfMigration) {
  auto c = make_client();
  temp_dir dir;
  const auto a = unique_name("m_a"), b = unique_name("m_b"), d = unique_name("m_d");
  const auto history = unique_name("hist");
  dir.write("0001_a.sql", create_table(a));
  const bool sqlite = backend().name == "sqlite";
  // The servers: a slow statement (the server keeps running it after the client died). SQLite: a
  // CPU-bound statement's length depends on the machine, so the runner itself pauses before
  // committing migration 2 (a test hook), run from this program instead of the command.
  dir.write("0002_b_slow.sql", create_table(b) + (sqlite ? std::string() : slow_statement(3) + ";\n"));
  dir.write("0003_d.sql", create_table(d));
  auto args = migrate_args(dir, history, "2s");
  args.push_back("--url");
  args.push_back(backend().url);
  temp_dir scratch;
  const auto marker = scratch.path() / "inside-2";
  auto first = sqlite ? std::make_unique<cli_process>(
                            "migrate_pause",
                            std::vector<std::string>{dir.path().string(), history, "2000", "30000", marker.string()})
                      : std::make_unique<cli_process>(args);
  auto o = options_for(history);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (sqlite && !std::filesystem::exists(marker) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  while (!sqlite && std::chrono::steady_clock::now() < deadline) {
    try {
      auto tx = c.begin({.lock_timeout = 50ms});
      auto rows = tx.query("SELECT COUNT(*) FROM " + history);
      tx.commit();
      if (rows.at(0).as_int(0) > 0) break;
    } catch (const sqllock::error&) {
      // not created yet
    }
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(800ms);  // inside 0002's slow statement
  first->kill_hard();
  const auto killed = first->wait();
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  const auto killed_at = std::chrono::steady_clock::now();

  auto hist = sqllock::migration_history(c, o);
  if (is_mysql()) {
    ASSERT_EQ(versions(hist), (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(hist[1].status, "running");
  } else {
    EXPECT_EQ(versions(hist), (std::vector<std::int64_t>{1}));
    EXPECT_FALSE(table_exists(c, b)) << "half of migration 2 is visible";
  }
  EXPECT_FALSE(table_exists(c, d));

  // The dead migrator's lease frees itself within its TTL (2 s) and the next run proceeds.
  {
    auto lease = c.try_acquire_for("sqllock:migrations:" + history, 10s);
    ASSERT_TRUE(lease.has_value());
    EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 3500ms);
  }
  auto second = run_cli(migrate_args(dir, history, "2s"));
  if (!is_mysql()) {
    EXPECT_EQ(second.exit_code, 0) << second.err;
    EXPECT_EQ(versions(sqllock::migration_history(c, o)), (std::vector<std::int64_t>{1, 2, 3}));
    EXPECT_TRUE(table_exists(c, b));
    EXPECT_TRUE(table_exists(c, d));
    return;
  }
  // MySQL: the interrupted migration blocks until a human resolves it.
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.err.find("interrupted"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("--resolve 2"), std::string::npos) << second.err;
  EXPECT_FALSE(table_exists(c, d));
  auto args_resolve = migrate_args(dir, history, "2s");
  args_resolve.insert(args_resolve.end(), {"--resolve", "2"});
  auto resolved = run_cli(args_resolve);
  EXPECT_EQ(resolved.exit_code, 0) << resolved.err;
  auto third = run_cli(migrate_args(dir, history, "2s"));
  EXPECT_EQ(third.exit_code, 0) << third.err;
  EXPECT_TRUE(table_exists(c, d));
  hist = sqllock::migration_history(c, o);
  ASSERT_EQ(versions(hist), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(hist[1].status, "resolved");
}

// A run that loses its lease again and again without progress (here a migration that keeps the
// lease's renewals out by locking its row, past the TTL, so the check before its commit finds the
// lease lost each time) ends with lease_lost; the command reported it as "database error" with
// exit 69, the code for a database that cannot be reached. It is the lease-lost code of `run`, 76.
// Only PostgreSQL checks the lease before a migration's commit (MySQL's DDL has committed, SQLite's
// write lock keeps takeovers out): the others apply the migration.
TEST(MigrateCommandPostgreSqlOnly, ALeaseLostRepeatedlyWithoutProgressExits76) {
  temp_dir dir;
  const auto history = unique_name("hist");
  dir.write("0001_holds_the_lease_row.sql", "SELECT name FROM sqllock_locks WHERE name = 'sqllock:migrations:" +
                                                 history + "' FOR UPDATE;\nSELECT pg_sleep(1.2);\n");
  auto r = run_cli(migrate_args(dir, history, "600ms"));
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_NE(r.err.find("lock-ttl"), std::string::npos) << r.err;
  auto c = make_client();
  EXPECT_EQ(versions(sqllock::migration_history(c, options_for(history))), std::vector<std::int64_t>{});
}

TEST(MigrateCommand, ChecksumMismatchAndUsage) {
  temp_dir dir;
  const auto history = unique_name("hist");
  dir.write("0001_a.sql", create_table(unique_name("m_a")));
  auto ok = run_cli(migrate_args(dir, history));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  dir.write("0001_a.sql", "-- changed\n");
  auto bad = run_cli(migrate_args(dir, history));
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("0001_a.sql"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("changed"), std::string::npos) << bad.err;
  auto usage = run_cli({"migrate", "--resolve", "1"});
  EXPECT_EQ(usage.exit_code, 64) << usage.err;
  auto bad_table = run_cli({"migrate", "--dir", dir.path().string(), "--history-table", "x;y"});
  EXPECT_EQ(bad_table.exit_code, 64) << bad_table.err;
  // The lock tables alone, as before.
  auto plain = run_cli({"migrate"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("schema version"), std::string::npos) << plain.out;
}

}  // namespace
}  // namespace stories
