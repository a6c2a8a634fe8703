// End-to-end tests of `sqllock run --shared` / `--exclusive` (issue 16) on SQLite: --shared runs side
// by side, --exclusive alone, a waiting --exclusive keeps new --shared runs out, and a plain run and
// a --shared/--exclusive run of one name refuse each other (64) instead of both running.
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
  /// A CMD that writes $SQLLOCK_FENCE to `out` and waits for the file `go`.
  std::string hold_until(const std::string& out, const std::string& go) const {
    return "echo \"$SQLLOCK_FENCE\" > " + path(out) + ".tmp && mv " + path(out) + ".tmp " + path(out) +
           "; while [ ! -f " + path(go) + " ]; do sleep 0.02; done";
  }
};

TEST_F(cli_rw, shared_runs_side_by_side_and_exclusive_runs_alone) {
  background_process a(run_args("db", {"--shared"}, hold_until("a", "go")), {});
  background_process b(run_args("db", {"--shared"}, hold_until("b", "go")), {});
  ASSERT_TRUE(wait_for_file(path("a")));
  ASSERT_TRUE(wait_for_file(path("b")));
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
  ASSERT_TRUE(wait_for_file(path("w")));
  const auto beside = run_process(run_args("db", {"--shared", "--wait", "0s"}, "echo ran > " + path("z")));
  EXPECT_EQ(beside.exit_code, 75) << beside.err;
  std::ofstream(path("go2")) << "go";
  EXPECT_EQ(w.wait().exit_code, 0);
  EXPECT_FALSE(file_exists(path("z")));
}

TEST_F(cli_rw, plain_and_read_write_runs_of_one_name_refuse_each_other) {
  background_process plain(run_args("mix", {}, hold_until("p", "go")), {});
  ASSERT_TRUE(wait_for_file(path("p")));
  for (const char* mode : {"--shared", "--exclusive"}) {
    const auto r = run_process(run_args("mix", {mode, "--wait", "1s"}, "echo ran > " + path("x")));
    EXPECT_EQ(r.exit_code, 64) << mode << ": " << r.err;
    EXPECT_NE(r.err.find("plain lock"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists(path("x"))) << "a --shared/--exclusive CMD ran beside a plain run";
  std::ofstream(path("go")) << "go";
  EXPECT_EQ(plain.wait().exit_code, 0);

  background_process reader(run_args("mix", {"--shared"}, hold_until("r", "go2")), {});
  ASSERT_TRUE(wait_for_file(path("r")));
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

}  // namespace
