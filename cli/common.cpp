// What every subcommand shares: URL resolution, the stderr log sink and error-to-exit-code mapping.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "commands.hpp"
#include "sqllock/error.hpp"
#include "sqllock/parse.hpp"

namespace sqllock_cli {

std::string resolve_url(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("SQLLOCK_URL"); env != nullptr && *env != '\0') return env;
  return "sqlite:sqllock.db";
}

void print_error(const std::string& message) {
  // One fprintf per line: stderr is unbuffered and glibc locks the stream per call, so lines from
  // the watchdog thread's log callback never interleave with ours.
  std::fprintf(stderr, "sqllock: %s\n", message.c_str());
}

sqllock::client_options make_client_options(const common_options& common) {
  sqllock::client_options options;
  if (!common.table.empty()) options.table = common.table;
  options.notifications = !common.no_notifications;
  options.prepared_statements = !common.no_prepared_statements;
  options.allow_unsafe_durability = common.allow_unsafe_durability;
  const int verbosity = common.verbosity;
  options.log = [verbosity](sqllock::log_level level, std::string_view message) {
    const char* label = nullptr;
    switch (level) {
      case sqllock::log_level::error:
        label = "error";
        break;
      case sqllock::log_level::warning:
        label = "warning";
        break;
      case sqllock::log_level::info:
        label = verbosity >= 1 ? "info" : nullptr;
        break;
      case sqllock::log_level::debug:
        label = verbosity >= 1 ? "debug" : nullptr;
        break;
    }
    if (label == nullptr) return;
    std::fprintf(stderr, "sqllock: %s: %.*s\n", label, static_cast<int>(message.size()), message.data());
  };
  return options;
}

std::string checked_redacted_url(const std::string& url) { return sqllock::parse_url(url).redacted(); }

namespace {

/// `message` about the database at `redacted_url`, naming the URL once: the library's connect
/// errors already name it.
std::string about(const std::string& redacted_url, const std::string& message) {
  if (message.find(redacted_url) != std::string::npos) return message;
  return redacted_url + ": " + message;
}

/// The server refused our credentials (not: could not be reached). PostgreSQL 28P01 (password)
/// and 28000 (pg_hba.conf), MySQL/MariaDB 1045 (access denied) and 1698 (no password given).
bool authentication_failed(const sqllock::error& e) {
  if (e.backend() == "postgresql") return e.code() == "28P01" || e.code() == "28000";
  if (e.backend() == "mysql") return e.code() == "1045" || e.code() == "1698";
  return false;
}

/// The URL to suggest to `sqllock migrate`: without a sqlite `mode=ro`, which migrate refuses.
std::string migrate_url(std::string url) {
  if (!url.starts_with("sqlite:")) return url;
  for (const char* part : {"&mode=ro", "mode=ro&", "?mode=ro"}) {
    if (auto at = url.find(part); at != std::string::npos) return url.erase(at, std::string_view(part).size());
  }
  return url;
}

}  // namespace

bool report_missing_sqlite_file(const std::string& url, const std::string& redacted_url) {
  const sqllock::database_url u = sqllock::parse_url(url);
  if (u.scheme != sqllock::database_url::kind::sqlite || u.path == ":memory:") return false;
  std::error_code ec;
  if (std::filesystem::exists(u.path, ec) || ec) return false;  // an unreadable one: let the open say why
  print_error(redacted_url + ": the database file does not exist (create it with `sqllock migrate --url '" +
              migrate_url(redacted_url) + "'`)");
  return true;
}

int report_exception(const std::string& redacted_url) {
  // Messages from the library never contain bound values or passwords (the contract); ours only
  // ever show the redacted URL.
  try {
    throw;
  } catch (const sqllock::invalid_argument& e) {
    print_error(e.what());
    return exit_code::usage;
  } catch (const sqllock::schema_too_new& e) {
    // A newer sqllock migrated the tables: migrate is no cure, upgrading this binary is (the
    // library's message says so).
    print_error(about(redacted_url, e.what()));
    return exit_code::unavailable;
  } catch (const sqllock::schema_missing& e) {
    // The library's message ends with its own hint ("run `sqllock migrate` first"); the command
    // gives the exact command line instead, once.
    std::string what = e.what();
    if (const auto hint = what.find(": run `sqllock migrate`"); hint != std::string::npos) what.resize(hint);
    print_error(about(redacted_url, what) + " (run `sqllock migrate --url '" + migrate_url(redacted_url) +
                "'` to create or upgrade the lock tables)");
    return exit_code::unavailable;
  } catch (const sqllock::connection_lost& e) {
    if (authentication_failed(e)) {
      print_error("authentication failed: " + about(redacted_url, e.what()) +
                  " (check the user name and password in the URL)");
    } else {
      print_error("cannot reach the database: " + about(redacted_url, e.what()));
    }
    return exit_code::unavailable;
  } catch (const sqllock::error& e) {
    // Anything else the database said (read-only file, permissions, not a database...): the lock
    // service is unusable for us, which is what 69 means to callers.
    if (authentication_failed(e)) {
      print_error("authentication failed: " + about(redacted_url, e.what()));
      return exit_code::unavailable;
    }
    print_error("database error: " + about(redacted_url, e.what()));
    return exit_code::unavailable;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return exit_code::software;
  } catch (...) {
    print_error("internal error: unknown exception");
    return exit_code::software;
  }
}

}  // namespace sqllock_cli
