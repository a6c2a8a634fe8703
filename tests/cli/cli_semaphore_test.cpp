// End-to-end tests of `sqllock run --permits N` (issue 16) on SQLite: N runs side by side, the
// next one refused (75), the permit count fixed with the name (64 naming both numbers).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
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

class cli_semaphore : public sqlite_fixture {
 protected:
  const char* dir_prefix() const override { return "cli-sem"; }
  /// `sqllock run --url U --name NAME --permits PERMITS EXTRA -- /bin/sh -c SCRIPT`, binary first.
  std::vector<std::string> run_args(const std::string& name, const std::string& permits, std::vector<std::string> extra,
                                    const std::string& script) {
    extra.insert(extra.begin(), {"--permits", permits});
    return with_binary(sqlite_fixture::run_args(name, std::move(extra), script));
  }
  /// A CMD that writes "$SQLLOCK_PERMIT $SQLLOCK_FENCE" to `out` and waits for the file "go".
  std::string hold_until_go(const std::string& out) const {
    return "echo \"$SQLLOCK_PERMIT $SQLLOCK_FENCE\" > " + path(out) + ".tmp && mv " + path(out) + ".tmp " +
           path(out) + "; while [ ! -f " + path("go") + " ]; do sleep 0.02; done";
  }
};

TEST_F(cli_semaphore, two_permits_run_side_by_side_and_a_third_is_refused) {
  background_process a(run_args("jobs", "2", {}, hold_until_go("a")), {});
  background_process b(run_args("jobs", "2", {}, hold_until_go("b")), {});
  ASSERT_TRUE(wait_for_file(path("a")));
  ASSERT_TRUE(wait_for_file(path("b")));
  int permit_a = -1, permit_b = -1;
  long long fence_a = 0, fence_b = 0;
  std::istringstream(read_file(path("a"))) >> permit_a >> fence_a;
  std::istringstream(read_file(path("b"))) >> permit_b >> fence_b;
  EXPECT_EQ((std::set<int>{permit_a, permit_b}), (std::set<int>{0, 1})) << "SQLLOCK_PERMIT of the two runs";
  EXPECT_GT(fence_a, 0);
  EXPECT_GT(fence_b, 0);

  const auto third = run_process(run_args("jobs", "2", {"--wait", "0s"}, "echo ran > " + path("c")));
  EXPECT_EQ(third.exit_code, 75) << third.err;
  EXPECT_NE(third.err.find("semaphore 'jobs'"), std::string::npos) << third.err;
  EXPECT_FALSE(file_exists(path("c"))) << "a third CMD ran with two permits held";

  std::ofstream(path("go")) << "go";
  EXPECT_EQ(a.wait().exit_code, 0);
  EXPECT_EQ(b.wait().exit_code, 0);
  // Both released: a later run gets a permit, with a greater token of its slot.
  const auto later = run_process(run_args("jobs", "2", {}, "echo \"$SQLLOCK_PERMIT $SQLLOCK_FENCE\" > " + path("d")));
  ASSERT_EQ(later.exit_code, 0) << later.err;
  int permit_d = -1;
  long long fence_d = 0;
  std::istringstream(read_file(path("d"))) >> permit_d >> fence_d;
  EXPECT_GT(fence_d, permit_d == permit_a ? fence_a : fence_b);
}

// A semaphore and a plain lock or a reader-writer lease of one name are different rows: a run in one
// mode refuses to start (64) beside a live holder in another, as plain and --shared/--exclusive
// runs do, instead of both running.
TEST_F(cli_semaphore, permit_runs_and_plain_or_read_write_runs_of_one_name_refuse_each_other) {
  background_process permit(run_args("mix", "2", {}, hold_until_go("p")), {});
  ASSERT_TRUE(wait_for_file(path("p")));
  for (const std::vector<std::string> mode : {std::vector<std::string>{}, {"--shared"}, {"--exclusive"}}) {
    auto args = with_binary(sqlite_fixture::run_args("mix", mode, "echo ran > " + path("x")));
    const auto r = run_process(args);
    EXPECT_EQ(r.exit_code, 64) << (mode.empty() ? "plain" : mode[0]) << ": " << r.err;
    EXPECT_NE(r.err.find("as a semaphore"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists(path("x"))) << "a plain or read-write CMD ran beside a permit run";
  std::ofstream(path("go")) << "go";
  EXPECT_EQ(permit.wait().exit_code, 0);
  std::filesystem::remove(path("go"));

  const auto hold_until_go2 = [&](const std::string& out) {
    return "echo ok > " + path(out) + "; while [ ! -f " + path("go2") + " ]; do sleep 0.02; done";
  };
  for (const std::vector<std::string> mode : {std::vector<std::string>{}, {"--shared"}, {"--exclusive"}}) {
    const std::string shown = mode.empty() ? "plain" : mode[0];
    const std::string held = "held-" + std::to_string(shown.size());
    background_process other(with_binary(sqlite_fixture::run_args("mix", mode, hold_until_go2(held))), {});
    ASSERT_TRUE(wait_for_file(path(held))) << shown;
    const auto r = run_process(run_args("mix", "2", {"--wait", "1s"}, "echo ran > " + path("y")));
    EXPECT_EQ(r.exit_code, 64) << shown << ": " << r.err;
    EXPECT_NE(r.err.find(mode.empty() ? "as a plain lock" : "as a reader-writer lease"), std::string::npos) << r.err;
    std::ofstream(path("go2")) << "go";
    EXPECT_EQ(other.wait().exit_code, 0) << shown;
    std::filesystem::remove(path("go2"));
  }
  EXPECT_FALSE(file_exists(path("y"))) << "a permit CMD ran beside a plain or read-write run";
  // Once nobody holds it in another mode, a permit run runs.
  EXPECT_EQ(run_process(run_args("mix", "2", {}, "true")).exit_code, 0);
}

TEST_F(cli_semaphore, waiting_for_a_permit_gets_it_when_one_is_freed) {
  background_process a(run_args("wait", "1", {}, hold_until_go("a")), {});
  ASSERT_TRUE(wait_for_file(path("a")));
  background_process b(run_args("wait", "1", {"--wait", "20s"}, "echo ran > " + path("b")), {});
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(file_exists(path("b"))) << "a second CMD ran with the only permit held";
  std::ofstream(path("go")) << "go";
  EXPECT_EQ(a.wait().exit_code, 0);
  EXPECT_EQ(b.wait().exit_code, 0);
  EXPECT_TRUE(file_exists(path("b")));
}

TEST_F(cli_semaphore, a_different_permit_count_is_a_usage_error_naming_both) {
  const auto first = run_process(run_args("fixed", "3", {}, "true"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto other = run_process(run_args("fixed", "4", {}, "echo ran > " + path("x")));
  EXPECT_EQ(other.exit_code, 64) << other.err;
  EXPECT_NE(other.err.find("has 3 permits"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("asked with 4"), std::string::npos) << other.err;
  EXPECT_FALSE(file_exists(path("x")));
  const auto again = run_process(run_args("fixed", "3", {}, "true"));
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(cli_semaphore, bad_permit_counts_are_usage_errors) {
  for (const char* bad : {"0", "-1", "10001", "two"}) {
    const auto r = run_process(run_args("bad", bad, {}, "echo ran > " + path("x")));
    EXPECT_EQ(r.exit_code, 64) << bad << ": " << r.err;
  }
  EXPECT_FALSE(file_exists(path("x")));
  // Checked before connecting: a usage error, not 69, also when the database cannot be opened.
  for (const char* bad : {"0", "10001"}) {
    const auto r = run_process(with_binary({"run", "--url", "sqlite:" + path("no-such-dir") + "/x.db", "--name", "bad",
                                            "--permits", bad, "--", "/bin/sh", "-c", "echo ran > " + path("y")}));
    EXPECT_EQ(r.exit_code, 64) << bad << " (database unreachable): " << r.err;
    EXPECT_NE(r.err.find("--permits"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists(path("y")));
}

// `status` shows a semaphore's permits under its name ("permit K"), never the derived row names.
TEST_F(cli_semaphore, status_shows_permits_under_the_semaphore_s_name) {
  background_process a(run_args("jobs", "3", {"--holder", "worker-a"}, hold_until_go("a")), {});
  ASSERT_TRUE(wait_for_file(path("a")));
  background_process b(run_args("jobs", "3", {"--holder", "worker-b"}, hold_until_go("b")), {});
  ASSERT_TRUE(wait_for_file(path("b")));
  int permit_a = -1, permit_b = -1;
  long long fence_a = 0, fence_b = 0;
  std::istringstream(read_file(path("a"))) >> permit_a >> fence_a;
  std::istringstream(read_file(path("b"))) >> permit_b >> fence_b;

  const auto table = run_process({cli_path(), "status", "--url", url_});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.find("sqllock.semaphore"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("jobs  permit " + std::to_string(permit_a) + "  worker-a"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("jobs  permit " + std::to_string(permit_b) + "  worker-b"), std::string::npos) << table.out;

  const auto json = run_process({cli_path(), "status", "--url", url_, "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out.find("sqllock.semaphore"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("{\"name\": \"jobs\", \"holder\": \"worker-a\", "), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"fencing_token\": " + std::to_string(fence_a) + ", "), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"mode\": \"permit\", \"permit\": " + std::to_string(permit_a) + "}"),
            std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"mode\": \"permit\", \"permit\": " + std::to_string(permit_b) + "}"),
            std::string::npos)
      << json.out;
  std::ofstream(path("go")) << "go";
  EXPECT_EQ(a.wait().exit_code, 0);
  EXPECT_EQ(b.wait().exit_code, 0);
}

}  // namespace
