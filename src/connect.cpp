// sqllock::connect: picks the backend built for the URL's scheme.
#include "core/backend.hpp"

namespace sqllock {

client connect(std::string_view url, const client_options& options) {
  detail::backend_config config{parse_url(url), options};
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
