// The `sqllock` command: argument parsing and dispatch to migrate, run, leader, status and release.
//
// Parsing uses CLI11: it is packaged in Debian (libcli11-dev) and header-only, so it adds no
// runtime dependency, and it has what this command needs out of the box: subcommands with their
// own options, options accepted before or after the subcommand, and `--` passthrough of CMD ARGS
// to `run` without trying to interpret CMD's own flags.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "sqllock/error.hpp"
#include "sqllock/parse.hpp"

#ifndef SQLLOCK_VERSION_STRING
#define SQLLOCK_VERSION_STRING "unknown"
#endif
#ifndef SQLLOCK_BACKENDS_STRING
#define SQLLOCK_BACKENDS_STRING "unknown"
#endif

namespace sqllock_cli {
namespace {

/// Parse a duration flag; a bad one is a usage error naming the flag.
std::chrono::milliseconds duration_flag(const char* flag, const std::string& text) {
  try {
    return sqllock::parse_duration(text);
  } catch (const sqllock::invalid_argument& e) {
    throw sqllock::invalid_argument(std::string(flag) + ": " + e.what());
  }
}

/// A lease duration flag (--ttl, --lock-ttl): also at least 1 ms, the error naming the flag.
std::chrono::milliseconds ttl_flag(const char* flag, const std::string& text) {
  const auto d = duration_flag(flag, text);
  try {
    sqllock::validate_ttl(d);
  } catch (const sqllock::invalid_argument& e) {
    throw sqllock::invalid_argument(std::string(flag) + " " + text + ": " + e.what());
  }
  return d;
}

/// A hold bound (--max-hold, --min-hold): a duration of at least 1 ms, the error naming the flag.
std::chrono::milliseconds hold_flag(const char* flag, const std::string& text) {
  const auto d = duration_flag(flag, text);
  if (d.count() <= 0) {
    throw sqllock::invalid_argument(std::string(flag) + " " + text +
                                    ": must be at least 1ms (leave the flag out for no bound)");
  }
  return d;
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions, so that
/// "statsu" is one edit from "status").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

/// "; did you mean 'X'?" for the candidate closest to `word` by edit distance, if it is close
/// enough to be a plausible typo (at most a third of the word's length, at least 1, at most 3).
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::clamp<std::size_t>(word.size() / 3, 1, 3);
  const std::string* best = nullptr;
  std::size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = &c;
    }
  }
  return best == nullptr ? std::string() : "; did you mean '" + *best + "'?";
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> option_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  return "unknown command '" + word + "'" + did_you_mean(word, subcommand_names(app)) +
         "\nRun 'sqllock help' for the list of commands.";
}

/// A parse error in the user's words: an unknown command or option named, with the closest
/// match; CLI11's own message otherwise.
std::string usage_message(const CLI::App& app, const CLI::ParseError& e) {
  // Arguments nobody took, innermost command first (an option the subcommand does not know).
  std::vector<const CLI::App*> commands;
  for (const CLI::App* sub : app.get_subcommands()) commands.push_back(sub);
  commands.push_back(&app);
  for (const CLI::App* cmd : commands) {
    for (const std::string& arg : cmd->remaining()) {
      if (arg == "--") continue;
      if (arg.size() > 1 && arg[0] == '-') {
        const std::string flag = arg.substr(0, arg.find('='));
        const std::string where = cmd == &app ? std::string() : " for '" + cmd->get_name() + "'";
        return "unknown option '" + flag + "'" + where + did_you_mean(flag, option_names(*cmd)) +
               "\nRun 'sqllock help" + (cmd == &app ? std::string() : " " + cmd->get_name()) +
               "' for its options.";
      }
      if (cmd == &app && app.get_subcommands().empty()) return unknown_command_message(app, arg);
      return "unexpected argument '" + arg + "'" + (cmd == &app ? std::string() : " for '" + cmd->get_name() + "'") +
             "\nRun 'sqllock help" + (cmd == &app ? std::string() : " " + cmd->get_name()) + "' for its usage.";
    }
  }
  if (app.get_subcommands().empty()) return "missing command\nRun 'sqllock help' for the list of commands.";
  const CLI::App* cmd = app.get_subcommands().front();
  return std::string(e.what()) + "\nRun 'sqllock help " + cmd->get_name() + "' for its usage.";
}

int main_impl(int argc, char** argv) {
  CLI::App app{
      "sqllock: distributed locks on PostgreSQL, MySQL/MariaDB and SQLite.\n"
      "The URL comes from --url, else $SQLLOCK_URL, else sqlite:sqllock.db.\n"
      "Durations are written 500ms, 30s, 5m, 1h.",
      "sqllock"};
  app.set_version_flag("-V,--version",
                       std::string("sqllock ") + SQLLOCK_VERSION_STRING + " (backends: " + SQLLOCK_BACKENDS_STRING + ")",
                       "print the version and the backends built in, and exit");
  app.require_subcommand(1, 1);

  // --url and -v belong to every subcommand (so each one's --help lists them) and are also
  // accepted before the subcommand; both bind the same variables.
  common_options common;
  const auto add_common = [&common](CLI::App* cmd) {
    cmd->add_option("--url", common.url,
                    "database URL: postgresql://..., mysql://... (or mariadb://...), sqlite:PATH, sqlite::memory: "
                    "(default: $SQLLOCK_URL, else sqlite:sqllock.db)");
    cmd->add_flag("-v,--verbose", common.verbosity, "also log the library's info and debug messages");
    // The library's own options; each may instead ride on the URL (?sqllock_table=...), which wins.
    cmd->add_option("--table", common.table, "lock table name, optionally schema.name (URL: sqllock_table=NAME)")
        ->default_str("sqllock_locks");
    cmd->add_flag("--no-notifications", common.no_notifications,
                  "poll instead of being woken by the database (LISTEN/NOTIFY, GET_LOCK); for PgBouncer in "
                  "transaction mode (URL: sqllock_notifications=off)");
    cmd->add_flag("--no-prepared-statements", common.no_prepared_statements,
                  "send every statement unprepared; for PgBouncer in transaction mode "
                  "(URL: sqllock_prepared_statements=off)");
    cmd->add_flag("--allow-unsafe-durability", common.allow_unsafe_durability,
                  "connect to a server that flushes commits lazily, accepting that a crash may reuse a fencing "
                  "token (URL: sqllock_allow_unsafe_durability=on)");
  };
  add_common(&app);

  // migrate
  migrate_options migrate;
  CLI::App* migrate_cmd =
      app.add_subcommand("migrate",
                         "create or upgrade the lock tables (idempotent); with --dir also apply DIR's NNNN_name.sql "
                         "migrations once each, in order, under a lease lock");
  add_common(migrate_cmd);
  std::string migrate_wait_text = "5m";
  std::string migrate_ttl_text = "30s";
  long long resolve_version = 0;
  long long retry_version = 0;
  migrate_cmd->add_option("--dir", migrate.dir, "directory of migration files NNNN_name.sql");
  migrate_cmd->add_option("--history-table", migrate.history_table, "table recording applied migrations")
      ->capture_default_str();
  migrate_cmd->add_option("--wait", migrate_wait_text, "how long to wait for another migrator")->capture_default_str();
  migrate_cmd
      ->add_option("--lock-ttl", migrate_ttl_text,
                   "lease of the migration lock (a killed migrator's lock frees itself after it)")
      ->capture_default_str();
  CLI::Option* resolve_opt = migrate_cmd->add_option(
      "--resolve", resolve_version,
      "record the failed or interrupted migration VERSION as applied, after fixing the schema by hand (MySQL)");
  CLI::Option* retry_opt = migrate_cmd->add_option(
      "--retry", retry_version,
      "forget the failed or interrupted migration VERSION so that the next run applies it again (MySQL)");
  resolve_opt->excludes(retry_opt);
  migrate_cmd->add_flag("--fail-on-missing", migrate.fail_on_missing,
                        "fail (instead of warning) when an applied migration's file is gone");

  // run
  run_options run;
  std::string ttl_text = "30s";
  std::string wait_text = "0s";
  std::string grace_text = "10s";
  std::string max_hold_text;
  std::string min_hold_text;
  std::string holder_text;
  CLI::App* run_cmd =
      app.add_subcommand("run",
                         "acquire NAME, run CMD with the lease renewed, release when CMD ends; exits with "
                         "CMD's code (75 not acquired, 76 lease lost, 64 usage, 69 database)");
  add_common(run_cmd);
  run_cmd
      ->add_option("--name", run.names,
                   "lock name (1..255 bytes of UTF-8); repeat it to take several names all or nothing (a "
                   "multi-lock, in sorted order within one --wait); SQLLOCK_FENCE then lists their fencing tokens, "
                   "comma-separated, in the order the names were given")
      ->required()
      ->allow_extra_args(false);
  run_cmd->add_option("--ttl", ttl_text, "lease duration, renewed at about a third of it")->capture_default_str();
  run_cmd->add_option("--wait", wait_text, "how long to wait for the lock (0s: one try)")->capture_default_str();
  run_cmd->add_option("--grace", grace_text, "after a lost lease: time between SIGTERM and SIGKILL to CMD")
      ->capture_default_str();
  CLI::Option* max_hold_opt = run_cmd->add_option(
      "--max-hold", max_hold_text,
      "hold the lock at most this long: then CMD is stopped as on a lost lease (SIGTERM, SIGKILL after "
      "--grace; exit 76) and the lock released");
  CLI::Option* min_hold_opt = run_cmd->add_option(
      "--min-hold", min_hold_text,
      "hold the lock at least this long: when CMD ends sooner, the lock stays held until then (so a job "
      "scheduled on several machines runs once)");
  CLI::Option* holder_opt =
      run_cmd->add_option("--holder", holder_text, "holder id to store (default host:pid:random)");
  int permits_value = 0;
  CLI::Option* permits_opt = run_cmd->add_option(
      "--permits", permits_value,
      "NAME is a counting semaphore of N permits (1..10000, fixed at the name's first use): take one of them; "
      "CMD gets SQLLOCK_PERMIT (the slot) and SQLLOCK_FENCE (the slot's token)");
  run_cmd->add_flag("--fair", run.fair,
                    "wait in NAME's fair queue: the lock goes to waiters in the order they asked, across "
                    "processes, and a fair holder's release hands it straight to the next one");
  bool shared_flag = false, exclusive_flag = false;
  CLI::Option* shared_opt = run_cmd->add_flag(
      "--shared", shared_flag, std::string("take the read lock of NAME's reader-writer lease: many --shared runs at once, none beside an "
                  "--exclusive one; a waiting --exclusive run keeps new --shared runs out"));
  CLI::Option* exclusive_opt = run_cmd->add_flag(
      "--exclusive", exclusive_flag, std::string("take the write lock of NAME's reader-writer lease (alone: no --shared and no other --exclusive run). "
      "Without --shared/--exclusive, run takes the plain lock NAME; the two are never mixed on one name "
      "(refused, exit 64)"));
  shared_opt->excludes(exclusive_opt);
  exclusive_opt->excludes(shared_opt);
  // As in flock(1): every argument from CMD on is CMD's, even ones that look like our flags, so
  // `sqllock run --name job ls -la` runs `ls -la`; `--` before CMD still works.
  run_cmd->add_option("command", run.command, "CMD ARGS...: the command to run; every argument after CMD is CMD's")
      ->required();
  run_cmd->positionals_at_end(true);

  // leader: run with one name, waiting without bound by default (a participant of an election)
  run_options leader;
  std::string leader_ttl_text = "30s";
  std::string leader_wait_text = "forever";
  std::string leader_grace_text = "10s";
  std::string leader_holder_text;
  std::string leader_name;
  CLI::App* leader_cmd = app.add_subcommand(
      "leader",
      "take part in the election NAME: wait until this process leads (holds NAME's lease), then run CMD "
      "while it leads; CMD is stopped as by run when leadership is lost (exit 76); exits with CMD's code");
  add_common(leader_cmd);
  leader_cmd->add_option("--name", leader_name, "election name (a lock name)")->required();
  leader_cmd->add_option("--ttl", leader_ttl_text, "leadership lease, renewed at about a third of it")
      ->capture_default_str();
  leader_cmd->add_option("--wait", leader_wait_text, "how long to wait for leadership (forever: no bound; 75 after it)")
      ->capture_default_str();
  leader_cmd->add_option("--grace", leader_grace_text, "after lost leadership: time between SIGTERM and SIGKILL to CMD")
      ->capture_default_str();
  CLI::Option* leader_holder_opt =
      leader_cmd->add_option("--holder", leader_holder_text, "label shown as the leader in status");
  leader_cmd->add_option("command", leader.command, "CMD ARGS...: the command to run while leading")->required();
  leader_cmd->positionals_at_end(true);

  // status
  status_options status;
  CLI::App* status_cmd = app.add_subcommand("status", "list held locks");
  add_common(status_cmd);
  status_cmd->add_flag("--json", status.json,
                       "print a JSON array of {name, holder, owner, fencing_token, hold_count, acquired_at, "
                       "expires_at, time_left_ms} (times RFC 3339 UTC, on the database's clock); reader-writer and "
                       "semaphore rows add mode (exclusive, shared with readers, permit with permit)");

  // release
  release_options release;
  CLI::App* release_cmd = app.add_subcommand("release",
                                             "administrative release of a stuck lock (needs --force); "
                                             "exits 0 also when the lock was not held (prints \"not held\")");
  add_common(release_cmd);
  release_cmd->add_option("--name", release.name, "lock name")->required();
  release_cmd->add_flag("--force", release.force, "really free the lock, whoever holds it");

  // help [COMMAND]
  std::string help_topic;
  CLI::App* help_cmd = app.add_subcommand("help", "show the help of sqllock or of one COMMAND");
  help_cmd->add_option("command", help_topic, "the command to show the help of");
  app.footer(
      "Run 'sqllock help COMMAND' for a command's options.\n"
      "Exit codes: 64 usage error, 69 database unreachable or schema missing, 74 output could not be written;\n"
      "run exits with CMD's code, or 75 (not acquired within --wait) or 76 (lease lost while CMD ran).");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      app.exit(e);  // prints the help or the version
      return exit_code::ok;
    }
    print_error(usage_message(app, e));
    return exit_code::usage;
  }

  if (*help_cmd) {
    if (help_topic.empty()) {
      // Not app.help(): that delegates to the selected subcommand, which is `help` itself.
      std::cout << app.get_formatter()->make_help(&app, "sqllock", CLI::AppFormatMode::Normal);
      return exit_code::ok;
    }
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == help_topic) {
        std::cout << sub->help("sqllock");
        return exit_code::ok;
      }
    }
    print_error(unknown_command_message(app, help_topic));
    return exit_code::usage;
  }

  if (*migrate_cmd) {
    try {
      migrate.wait = duration_flag("--wait", migrate_wait_text);
      migrate.lock_ttl = ttl_flag("--lock-ttl", migrate_ttl_text);
      if ((*resolve_opt || *retry_opt) && migrate.dir.empty()) {
        throw sqllock::invalid_argument("--resolve and --retry need --dir DIR");
      }
    } catch (const sqllock::invalid_argument& e) {
      print_error(e.what());
      return exit_code::usage;
    }
    if (*resolve_opt) migrate.resolve = resolve_version;
    if (*retry_opt) migrate.retry = retry_version;
    return run_migrate(common, migrate);
  }
  if (*status_cmd) return run_status(common, status);
  if (*release_cmd) return run_release(common, release);
  if (*leader_cmd) {
    try {
      leader.names = {leader_name};
      leader.ttl = ttl_flag("--ttl", leader_ttl_text);
      leader.wait = leader_wait_text == "forever" ? std::chrono::milliseconds::max()
                                                  : duration_flag("--wait", leader_wait_text);
      leader.grace = duration_flag("--grace", leader_grace_text);
    } catch (const sqllock::invalid_argument& e) {
      print_error(e.what());
      return exit_code::usage;
    }
    if (*leader_holder_opt) leader.holder = leader_holder_text;
    return run_run(common, leader);
  }
  if (*run_cmd) {
    try {
      run.ttl = ttl_flag("--ttl", ttl_text);
      run.wait = duration_flag("--wait", wait_text);
      run.grace = duration_flag("--grace", grace_text);
      if (*max_hold_opt) run.max_hold = hold_flag("--max-hold", max_hold_text);
      if (*min_hold_opt) run.min_hold = hold_flag("--min-hold", min_hold_text);
      if (*max_hold_opt && *min_hold_opt && run.min_hold > run.max_hold) {
        throw sqllock::invalid_argument("--min-hold " + min_hold_text + " is longer than --max-hold " + max_hold_text);
      }
    } catch (const sqllock::invalid_argument& e) {
      print_error(e.what());
      return exit_code::usage;
    }
    if (*holder_opt) run.holder = holder_text;
    if (*permits_opt) run.permits = permits_value;
    if (*shared_opt) run.rw = run_options::rw_mode::shared;
    if (*exclusive_opt) run.rw = run_options::rw_mode::exclusive;
    return run_run(common, run);
  }
  return exit_code::usage;  // unreachable: require_subcommand(1, 1)
}

}  // namespace
}  // namespace sqllock_cli

int main(int argc, char** argv) {
  int code = sqllock_cli::exit_code::software;
  try {
    code = sqllock_cli::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sqllock: internal error: %s\n", e.what());
  }
  // As coreutils' close_stdout: output that could not be written (a full disk, /dev/full, a
  // closed pipe's EIO) is an error, not a silent success. std::cout shares stdout's buffer.
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout.good()) {
    const int err = errno;
    std::fprintf(stderr, "sqllock: write error: %s\n", err != 0 ? std::strerror(err) : "output failed");
    return sqllock_cli::exit_code::io_error;
  }
  return code;
}
