// sqllock::connect: takes sqllock's own sqllock_ parameters off the URL, picks the backend for its scheme.
#include <cstdio>

#include "core/backend.hpp"

namespace sqllock {
namespace {

bool flag_value(const std::string& key, const std::string& value) {
  if (value == "on" || value == "true" || value == "1" || value == "yes") return true;
  if (value == "off" || value == "false" || value == "0" || value == "no") return false;
  throw invalid_argument("invalid URL parameter " + key + ": expected on or off (true/false, 1/0, yes/no)");
}

/// Move every sqllock_ parameter of `url` into `options` (the URL's value wins over the caller's:
/// the URL is where a deployment says how to reach its database, e.g. through PgBouncer).
void take_url_options(database_url& url, client_options& options) {
  // SQLite's mode=ro (parse_url accepts only ro and rw there) opens read-only; mode=rw, the
  // default, leaves a client the caller asked to be read-only read-only.
  if (url.scheme == database_url::kind::sqlite) {
    if (auto mode = url.params.find("mode"); mode != url.params.end()) {
      if (mode->second == "ro") options.read_only = true;
      url.params.erase(mode);
    }
  }
  for (auto it = url.params.begin(); it != url.params.end();) {
    const std::string& key = it->first;
    if (!key.starts_with("sqllock_")) {
      ++it;
      continue;
    }
    const std::string& value = it->second;
    if (key == "sqllock_table") {
      options.table = value;
    } else if (key == "sqllock_notifications") {
      options.notifications = flag_value(key, value);
    } else if (key == "sqllock_prepared_statements") {
      options.prepared_statements = flag_value(key, value);
    } else if (key == "sqllock_allow_unsafe_durability") {
      options.allow_unsafe_durability = flag_value(key, value);
    } else {
      throw invalid_argument("unknown URL parameter " + key +
                             " (known: sqllock_table, sqllock_notifications, sqllock_prepared_statements, "
                             "sqllock_allow_unsafe_durability)");
    }
    it = url.params.erase(it);
  }
}

}  // namespace

client connect(std::string_view url, const client_options& caller_options) {
  detail::backend_config config{parse_url(url), caller_options};
  take_url_options(config.url, config.options);
  const client_options& options = config.options;
  validate_identifier(options.table);
  validate_identifier(options.table + "_schema");
  if (options.poll_min.count() < 1 || options.poll_max < options.poll_min) {
    throw invalid_argument("client_options: need 1 ms <= poll_min <= poll_max");
  }
  std::unique_ptr<detail::backend> b;
  switch (config.url.scheme) {
    case database_url::kind::sqlite:
#if SQLLOCK_HAVE_SQLITE
      b = detail::make_sqlite_backend(config);
#endif
      break;
    case database_url::kind::postgresql:
#if SQLLOCK_HAVE_POSTGRESQL
      b = detail::make_postgresql_backend(config);
#endif
      break;
    case database_url::kind::mysql:
#if SQLLOCK_HAVE_MYSQL
      b = detail::make_mysql_backend(config);
#endif
      break;
  }
  if (!b) {
    throw invalid_argument("this sqllock was built without the backend for " + config.url.redacted());
  }
  return client(std::move(b), options);
}

}  // namespace sqllock
