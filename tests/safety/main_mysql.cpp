// The safety suite on MariaDB (a throwaway server of scripts/mariadb-server.sh).
#include <cstdlib>

#include "safety/safety_fixture.hpp"

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

int main(int argc, char** argv) {
  const std::string admin_url = env("SQLLOCK_TEST_MYSQL_ADMIN_URL");
  auto admin = [admin_url](const std::string& sql) {
    auto c = sqllock::connect(admin_url, {.require_schema = false, .allow_unsafe_durability = true});
    auto tx = c.begin();
    tx.execute(sql);
    tx.commit();
  };
  return sqllock_safety::run_suite(argc, argv,
                                   {.name = "mysql",
                                    .url = env("SQLLOCK_TEST_MYSQL_URL"),
                                    .admin_url = admin_url,
                                    .crash = env("SQLLOCK_TEST_MYSQL_CRASH"),
                                    .admin = admin});
}
