// The fixture of CLI tests that need network faults: the sqllock binary talks to a server backend
// (PostgreSQL or MariaDB, from SQLLOCK_TEST_POSTGRESQL_URL / SQLLOCK_TEST_MYSQL_URL; the test's
// parameter) through a fault proxy (tests/common/fault_proxy.hpp), on a lock table of its own.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "cli_fixture.hpp"
#include "common/fault_proxy.hpp"

namespace cli_test {

/// GetParam(): "postgresql" or "mysql". url_ goes through proxy(); direct_url() does not (for
/// looking at the lock table while the proxy partitions). A missing server URL is a failure.
class cli_through_proxy : public cli, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    cli::SetUp();  // the temporary directory (migrate_in_setup() is false: no SQLite database)
    const char* var = GetParam() == "postgresql" ? "SQLLOCK_TEST_POSTGRESQL_URL" : "SQLLOCK_TEST_MYSQL_URL";
    const char* server = std::getenv(var);
    ASSERT_TRUE(server && *server) << var << " is not set (a failure, not a skip; source scripts/*-server.sh's env.sh)";
    static std::atomic<int> counter{0};
    const std::string table = "cli_px_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    const std::string server_url(server);
    const std::string sep = server_url.find('?') == std::string::npos ? "?" : "&";
    direct_url_ = server_url + sep + "sqllock_table=" + table;
    // The proxy's upstream: host and port of the server URL (user@host:port/db).
    const auto at = server_url.rfind('@');
    const auto host_start = at == std::string::npos ? server_url.find("://") + 3 : at + 1;
    const auto host_end = server_url.find_first_of("/?", host_start);
    const std::string host_port = server_url.substr(host_start, host_end - host_start);
    const auto colon = host_port.rfind(':');
    ASSERT_NE(colon, std::string::npos) << var << " needs an explicit port";
    proxy_ = std::make_unique<sqllock::test::fault_proxy>(host_port.substr(0, colon),
                                                          std::stoi(host_port.substr(colon + 1)));
    url_ = proxy_->wrap_url(server_url) + sep + "sqllock_table=" + table;
    const auto r = sqllock({"migrate", "--url", direct_url_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void TearDown() override {
    if (proxy_) proxy_->pass();
    proxy_.reset();
    cli::TearDown();
  }
  bool migrate_in_setup() const override { return false; }

  sqllock::test::fault_proxy& proxy() { return *proxy_; }
  const std::string& direct_url() const { return direct_url_; }
  /// `status --json` read past the proxy.
  json_value direct_status_json() {
    const auto r = sqllock({"status", "--url", direct_url_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parse_json(r.out);
  }

 private:
  std::unique_ptr<sqllock::test::fault_proxy> proxy_;
  std::string direct_url_;
};

}  // namespace cli_test
