// Shared fixture of the story tests: the backend under test, unique names, the sqllock command.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/test_support.hpp"
#include "sqllock/sqllock.hpp"

namespace stories {

/// The backend this program tests ("sqlite", "postgresql", "mysql") and its URL.
struct backend_under_test {
  std::string name;
  std::string url;
};

const backend_under_test& backend();
/// Called by each main: checks the URL (missing: exit 2, a failure), migrates, runs the tests.
/// With SQLLOCK_STORIES_ROLE set, runs that child role instead:
///   migrate_pause DIR HISTORY TTL_MS PAUSE_MS MARKER: migrate_directory; before committing
///   version 2, write the file MARKER and sleep PAUSE_MS (a slow migration without a slow
///   statement, for SQLite).
int run_stories(int argc, char** argv, backend_under_test b);

/// A name unique to this run (letters, digits, underscores).
using sqllock_testing::unique_name;
sqllock::client make_client(sqllock::client_options options = {});
sqllock::dialect current_dialect();

/// Run one statement in its own transaction; query returns the rows.
void exec(sqllock::client& c, const std::string& sql, const std::vector<sqllock::value>& params = {});
sqllock::result_rows query(sqllock::client& c, const std::string& sql, const std::vector<sqllock::value>& params = {});
bool table_exists(sqllock::client& c, const std::string& table);

/// A fresh temporary directory, removed at scope end.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  const std::filesystem::path& path() const { return path_; }
  void write(const std::string& file, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

/// A child process of the sqllock command with stdout/stderr captured.
struct process_result {
  int exit_code = -1;  ///< 128 + signal when killed
  std::string out, err;
};
class cli_process {
 public:
  explicit cli_process(const std::vector<std::string>& args);
  /// This test program again, running child `role` (see run_stories) with args.
  cli_process(const std::string& role, const std::vector<std::string>& args);
  ~cli_process();
  int pid() const { return pid_; }
  process_result wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  void kill_hard();

 private:
  void start(std::vector<std::string> argv, const std::string& role);
  int pid_ = -1;
  bool reaped_ = false;
  std::string out_, err_;
  process_result result_;
};
/// Run `sqllock ARGS... --url <backend url>` to completion.
process_result run_cli(std::vector<std::string> args);

/// A slow statement for the dialect (about `seconds` long).
std::string slow_statement(int seconds);

}  // namespace stories
