// What every subcommand shares: URL resolution, the stderr log sink and error-to-exit-code mapping.
#include <cstdio>
#include <cstdlib>
#include <exception>
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

int report_exception(const std::string& redacted_url) {
  // Messages from the library never contain bound values or passwords (the contract); ours only
  // ever show the redacted URL.
  try {
    throw;
  } catch (const sqllock::invalid_argument& e) {
    print_error(e.what());
    return exit_code::usage;
  } catch (const sqllock::schema_missing& e) {
    print_error(redacted_url + ": " + e.what() + " (create or upgrade them with `sqllock migrate --url '" +
                redacted_url + "'`)");
    return exit_code::unavailable;
  } catch (const sqllock::connection_lost& e) {
    print_error(std::string("cannot reach the database ") + redacted_url + ": " + e.what());
    return exit_code::unavailable;
  } catch (const sqllock::error& e) {
    // Anything else the database said (read-only file, permissions, not a database...): the lock
    // service is unusable for us, which is what 69 means to callers.
    print_error(std::string("database error on ") + redacted_url + ": " + e.what());
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
