// End-to-end tests of `sqllock run --shared` / `--exclusive` (issue 16) on SQLite: --shared runs side
// by side, --exclusive alone, a waiting --exclusive keeps new --shared runs out, and a plain run and
// a --shared/--exclusive run of one name refuse each other (64) instead of both running.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "sqlite_fixture.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

class cli_rw : public sqlite_fixture {
 protected:
  const char* dir_prefix() const override { return "cli-rw"; }
  /// `sqllock run --url U --name NAME EXTRA -- /bin/sh -c SCRIPT`, binary first.
  std::vector<std::string> run_args(const std::string& name, std::vector<std::string> extra, const std::string& script) {
    return with_binary(sqlite_fixture::run_args(name, std::move(extra), script));
  }
  /// Poll `status` until it shows `text` (10 s at most).
  bool wait_until_status_shows(const std::string& text) {
    for (int i = 0; i < 500; ++i) {
      if (run_process({cli_path(), "status", "--url", url_}).out.find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  /// A CMD that writes $SQLLOCK_FENCE to `out` and waits for the file `go`.
  std::string hold_until(const std::string& out, const std::string& go) const {
    return "echo \"$SQLLOCK_FENCE\" > " + path(out) + ".tmp && mv " + path(out) + ".tmp " + path(out) +
           "; while [ ! -f " + path(go) + " ]; do sleep 0.02; done";
  }
};

TEST_F(cli_rw, shared_runs_side_by_side_and_exclusive_runs_alone) {
  background_process a(run_args("db", {"--shared"}, hold_until("a", "go")), {});
  background_process b(run_args("db", {"--shared"}, hold_until("b", "go")), {});
  ASSERT_TRUE(wait_for_file(path("a"), a)) << a.describe();
  ASSERT_TRUE(wait_for_file(path("b"), b)) << b.describe();
  const auto busy = run_process(run_args("db", {"--exclusive", "--wait", "0s"}, "echo ran > " + path("x")));
  EXPECT_EQ(busy.exit_code, 75) << busy.err;
  EXPECT_NE(busy.err.find("write lock of 'db'"), std::string::npos) << busy.err;
  EXPECT_FALSE(file_exists(path("x"))) << "an --exclusive CMD ran beside --shared ones";

  // A waiting --exclusive run keeps new --shared runs out (writer preference), then runs alone.
  background_process w(run_args("db", {"--exclusive", "--wait", "20s"}, hold_until("w", "go2")), {});
  std::this_thread::sleep_for(500ms);
  const auto late = run_process(run_args("db", {"--shared", "--wait", "0s"}, "echo ran > " + path("y")));
  EXPECT_EQ(late.exit_code, 75) << late.err;
  EXPECT_FALSE(file_exists(path("y"))) << "a --shared run passed a waiting --exclusive one";
  EXPECT_FALSE(file_exists(path("w")));
  std::ofstream(path("go")) << "go";
  EXPECT_EQ(a.wait().exit_code, 0);
  EXPECT_EQ(b.wait().exit_code, 0);
  ASSERT_TRUE(wait_for_file(path("w"), w)) << w.describe();
  const auto beside = run_process(run_args("db", {"--shared", "--wait", "0s"}, "echo ran > " + path("z")));
  EXPECT_EQ(beside.exit_code, 75) << beside.err;
  std::ofstream(path("go2")) << "go";
  EXPECT_EQ(w.wait().exit_code, 0);
  EXPECT_FALSE(file_exists(path("z")));
}

TEST_F(cli_rw, plain_and_read_write_runs_of_one_name_refuse_each_other) {
  background_process plain(run_args("mix", {}, hold_until("p", "go")), {});
  ASSERT_TRUE(wait_for_file(path("p"), plain)) << plain.describe();
  for (const char* mode : {"--shared", "--exclusive"}) {
    const auto r = run_process(run_args("mix", {mode, "--wait", "1s"}, "echo ran > " + path("x")));
    EXPECT_EQ(r.exit_code, 64) << mode << ": " << r.err;
    EXPECT_NE(r.err.find("plain lock"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists(path("x"))) << "a --shared/--exclusive CMD ran beside a plain run";
  std::ofstream(path("go")) << "go";
  EXPECT_EQ(plain.wait().exit_code, 0);

  background_process reader(run_args("mix", {"--shared"}, hold_until("r", "go2")), {});
  ASSERT_TRUE(wait_for_file(path("r"), reader)) << reader.describe();
  const auto r = run_process(run_args("mix", {"--wait", "1s"}, "echo ran > " + path("y")));
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("reader-writer lease"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(path("y"))) << "a plain CMD ran beside a --shared run";
  std::ofstream(path("go2")) << "go";
  EXPECT_EQ(reader.wait().exit_code, 0);
  // Once nobody holds it in the other mode, either mode runs.
  EXPECT_EQ(run_process(run_args("mix", {}, "true")).exit_code, 0);
  EXPECT_EQ(run_process(run_args("mix", {"--exclusive"}, "true")).exit_code, 0);
}

TEST_F(cli_rw, bad_combinations_are_usage_errors) {
  const std::vector<std::vector<std::string>> bad{
      {"--shared", "--exclusive"}, {"--shared", "--permits", "2"}, {"--exclusive", "--name", "other"}};
  for (const auto& extra : bad) {
    const auto r = run_process(run_args("bad", extra, "echo ran > " + path("x")));
    EXPECT_EQ(r.exit_code, 64) << extra[0] << " " << extra[1] << ": " << r.err;
  }
  EXPECT_FALSE(file_exists(path("x")));
}

// `status` shows a reader-writer lease under its name with its mode, each holder on a row of its
// own (holder, fence, expiry), never the derived row names the library stores them under.
TEST_F(cli_rw, status_shows_readers_and_the_writer_under_the_lock_s_name) {
  background_process r1(run_args("db", {"--shared", "--holder", "reader-1"}, hold_until("r1", "go")), {});
  background_process r2(run_args("db", {"--shared", "--holder", "reader-2"}, hold_until("r2", "go")), {});
  background_process w(run_args("wr", {"--exclusive", "--holder", "writer-1"}, hold_until("w", "go")), {});
  background_process p(run_args("plain", {"--holder", "plain-1"}, hold_until("p", "go")), {});
  // Each run writes its file once CMD runs; one that exits first (it failed) ends the wait at once.
  for (const auto& [f, holder] : {std::pair<const char*, const background_process*>{"r1", &r1}, {"r2", &r2},
                                  {"w", &w}, {"p", &p}}) {
    ASSERT_TRUE(wait_for_file(path(f), *holder)) << f << ": " << holder->describe();
  }
  const std::string fence_r1 = read_file(path("r1")).substr(0, read_file(path("r1")).find('\n'));
  const std::string fence_w = read_file(path("w")).substr(0, read_file(path("w")).find('\n'));

  // Each reader-writer lease has a fence row in the table (its fencing counter, no holder): the
  // library's bookkeeping, which status never lists (the lease shows once per holder).
  const auto fences = run_process({"sqlite3", dir_ + "/locks.db",
                                   "SELECT rtrim(name, '.') FROM sqllock_locks WHERE name LIKE 'sqllock.rwlock.%.fence%' "
                                   "ORDER BY name"});
  ASSERT_EQ(fences.exit_code, 0) << fences.err;
  EXPECT_EQ(fences.out, "sqllock.rwlock.2.db.fence\nsqllock.rwlock.2.wr.fence\n");
  const auto table = run_process({cli_path(), "status", "--url", url_});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.find("sqllock.rwlock"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("fence"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.rfind("NAME   MODE                HOLDER    FENCE", 0), 0u) << table.out;
  std::istringstream lines(table.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 5u) << table.out;
  EXPECT_EQ(rows[1].rfind("db     shared (2 readers)  reader-", 0), 0u) << table.out;
  EXPECT_EQ(rows[2].rfind("db     shared (2 readers)  reader-", 0), 0u) << table.out;
  EXPECT_EQ(rows[3].rfind("plain                      plain-1", 0), 0u) << table.out;
  EXPECT_EQ(rows[4].rfind("wr     exclusive           writer-1", 0), 0u) << table.out;
  EXPECT_NE(rows[4].find(" " + fence_w + "  "), std::string::npos) << table.out;

  const auto json = run_process({cli_path(), "status", "--url", url_, "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out.find("sqllock.rwlock"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"name\": \"db\", \"holder\": \"reader-1\", "), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"fencing_token\": " + fence_r1 + ", "), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"name\": \"db\", \"holder\": \"reader-2\", "), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"name\": \"wr\", \"holder\": \"writer-1\", "), std::string::npos) << json.out;
  const auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = json.out.find(needle); at != std::string::npos; at = json.out.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("\"mode\": \"shared\", \"readers\": 2}"), 2u) << json.out;
  EXPECT_EQ(count("\"mode\": \"exclusive\"}"), 1u) << json.out;
  EXPECT_EQ(count("\"mode\""), 3u) << "a plain lock's object is as before, without mode: " << json.out;
  EXPECT_EQ(count("\"waiting\""), 0u) << json.out;

  // A writer waiting for the readers holds its row already: shown as waiting, not as the holder.
  background_process w2(run_args("db", {"--exclusive", "--wait", "20s", "--holder", "writer-2"}, hold_until("w2", "go2")),
                        {});
  ASSERT_TRUE(wait_until_status_shows("writer-2")) << "the waiting writer's row";
  const auto waiting = run_process({cli_path(), "status", "--url", url_});
  EXPECT_NE(waiting.out.find("db     exclusive (waiting for readers)  writer-2"), std::string::npos) << waiting.out;
  const auto waiting_json = run_process({cli_path(), "status", "--url", url_, "--json"});
  EXPECT_NE(waiting_json.out.find("\"mode\": \"exclusive\", \"waiting\": true}"), std::string::npos) << waiting_json.out;
  EXPECT_FALSE(file_exists(path("w2")));
  std::ofstream(path("go")) << "go";
  for (auto* b : {&r1, &r2, &w, &p}) EXPECT_EQ(b->wait().exit_code, 0);
  ASSERT_TRUE(wait_for_file(path("w2"), w2)) << w2.describe();
  const auto alone = run_process({cli_path(), "status", "--url", url_});
  EXPECT_NE(alone.out.find("db    exclusive  writer-2"), std::string::npos) << "in, no longer waiting: " << alone.out;
  std::ofstream(path("go2")) << "go";
  EXPECT_EQ(w2.wait().exit_code, 0);
}

}  // namespace
