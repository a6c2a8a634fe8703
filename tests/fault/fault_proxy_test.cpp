// The fault proxy against a real PostgreSQL: each fault mode does what it says, seen through libpq.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/fault_proxy.hpp"

using namespace std::chrono_literals;
using sqllock::test::fault_proxy;
using steady = std::chrono::steady_clock;

namespace {

std::string url() {
  const char* v = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
  return v ? v : "";
}

// host and port of the server named by the test URL (postgresql://u:p@HOST:PORT/db).
std::pair<std::string, int> server_of(const std::string& u) {
  auto at = u.rfind('@');
  auto slash = u.find('/', at);
  auto hp = u.substr(at + 1, slash - at - 1);
  auto colon = hp.rfind(':');
  return {hp.substr(0, colon), std::stoi(hp.substr(colon + 1))};
}

std::string with_param(const std::string& u, const std::string& kv) {
  return u + (u.find('?') == std::string::npos ? "?" : "&") + kv;
}

enum class outcome { answered, silent, failed };

// A libpq connection whose queries wait at most a given time for their answer.
class pg {
 public:
  explicit pg(const std::string& u) : c_(PQconnectdb(u.c_str())) {}
  ~pg() { PQfinish(c_); }
  bool ok() const { return PQstatus(c_) == CONNECTION_OK; }
  std::string error() const { return PQerrorMessage(c_); }

  // Sends `sql` and waits up to `limit` for its complete answer; `value` gets the first field.
  outcome query(const std::string& sql, std::chrono::milliseconds limit, std::string* value = nullptr) {
    if (!PQsendQuery(c_, sql.c_str())) return outcome::failed;
    return wait(limit, value);
  }

  // Waits up to `limit` for the answer of the query in flight.
  outcome wait(std::chrono::milliseconds limit, std::string* value = nullptr) {
    const auto deadline = steady::now() + limit;
    while (PQisBusy(c_)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
      if (left <= 0) return outcome::silent;
      pollfd p{PQsocket(c_), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) > 0 && !PQconsumeInput(c_)) return outcome::failed;
    }
    bool good = true;
    while (PGresult* r = PQgetResult(c_)) {
      const auto st = PQresultStatus(r);
      if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) good = false;
      if (value && st == PGRES_TUPLES_OK && PQntuples(r) > 0) *value = PQgetvalue(r, 0, 0);
      PQclear(r);
    }
    return good && PQstatus(c_) == CONNECTION_OK ? outcome::answered : outcome::failed;
  }

 private:
  PGconn* c_;
};

std::string table() {
  static const auto run = std::random_device{}() % 1000000;
  static std::atomic<int> n{0};
  return "fault_proxy_t_" + std::to_string(run) + "_" + std::to_string(n++);
}

class FaultProxy : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(url().empty()) << "SQLLOCK_TEST_POSTGRESQL_URL is not set (scripts/postgresql-server.sh start DIR)";
    auto [host, port] = server_of(url());
    proxy_ = std::make_unique<fault_proxy>(host, port);
    // connect_timeout bounds a connection attempt that hears nothing (a partition).
    proxied_ = with_param(proxy_->wrap_url(url()), "connect_timeout=2");
  }
  std::unique_ptr<fault_proxy> proxy_;
  std::string proxied_;
};

}  // namespace

TEST(FaultProxyUrl, WrapsHostAndPortKeepsTheRest) {
  using sqllock::test::replace_url_host;
  EXPECT_EQ(replace_url_host("postgresql://u:p@db.example:5432/app?sslmode=disable", "127.0.0.1", 7),
            "postgresql://u:p@127.0.0.1:7/app?sslmode=disable");
  EXPECT_EQ(replace_url_host("postgres://db/app", "127.0.0.1", 7), "postgres://127.0.0.1:7/app");
  EXPECT_EQ(replace_url_host("mysql://u:p%40x@[::1]:3306/d", "127.0.0.1", 9), "mysql://u:p%40x@127.0.0.1:9/d");
  EXPECT_EQ(replace_url_host("mysql://u@h", "127.0.0.1", 9), "mysql://u@127.0.0.1:9");
  EXPECT_THROW(replace_url_host("sqlite:x.db", "127.0.0.1", 1), std::invalid_argument);
  EXPECT_THROW(replace_url_host("http://h/x", "127.0.0.1", 1), std::invalid_argument);
}

TEST(FaultProxyRefused, ClientSeesAResetWhenTheServerIsDown) {
  // A port nobody listens on: bind, read the port, close.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const int dead_port = ntohs(a.sin_port);
  ::close(s);
  fault_proxy proxy("127.0.0.1", dead_port);
  pg c("postgresql://u:p@127.0.0.1:" + std::to_string(proxy.port()) + "/d?connect_timeout=5");
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(proxy.upstream_refused(), 1u);
  EXPECT_EQ(proxy.connections(), 0u);
}

TEST_F(FaultProxy, PassForwardsQueries) {
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  std::string v;
  EXPECT_EQ(c.query("SELECT 40 + 2", 5s, &v), outcome::answered);
  EXPECT_EQ(v, "42");
  EXPECT_EQ(proxy_->connections(), 1u);
  EXPECT_EQ(proxy_->accepted(), 1u);
}

TEST_F(FaultProxy, BlackholeSilencesBothWaysWithoutReset) {
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  proxy_->blackhole();
  // The query goes nowhere; nothing comes back, and the connection is not reset either.
  EXPECT_EQ(c.query("SELECT 1", 1500ms), outcome::silent);
  EXPECT_EQ(proxy_->connections(), 1u);
  EXPECT_GT(proxy_->bytes_dropped(), 0u);
  // A new connection is accepted and hears nothing: it times out (connect_timeout=2), not refused.
  const auto t0 = steady::now();
  pg fresh(proxied_);
  EXPECT_FALSE(fresh.ok());
  EXPECT_GE(steady::now() - t0, 1900ms);
  // After the partition: new connections work, the one that lost bytes stays silent...
  proxy_->pass();
  pg after(proxied_);
  ASSERT_TRUE(after.ok()) << after.error();
  EXPECT_EQ(after.query("SELECT 1", 5s), outcome::answered);
  EXPECT_EQ(c.wait(1000ms), outcome::silent);
  // ...until it is reset, as a keepalive would end it.
  proxy_->cut_silenced();
  EXPECT_EQ(c.wait(5s), outcome::failed);
  EXPECT_EQ(after.query("SELECT 1", 5s), outcome::answered);
}

TEST_F(FaultProxy, IdleConnectionSurvivesABlackholeThatDroppedNothing) {
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  proxy_->blackhole();
  std::this_thread::sleep_for(300ms);
  proxy_->pass();
  EXPECT_EQ(c.query("SELECT 1", 5s), outcome::answered);
}

TEST_F(FaultProxy, LoseNextAnswerCommitsButTheClientNeverHears) {
  pg direct(url());
  ASSERT_TRUE(direct.ok()) << direct.error();
  const auto t = table();
  ASSERT_EQ(direct.query("CREATE TABLE " + t + " (v int)", 5s), outcome::answered);
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  proxy_->lose_next_answer();
  EXPECT_EQ(c.query("INSERT INTO " + t + " VALUES (7)", 1500ms), outcome::silent);
  EXPECT_EQ(proxy_->answers_lost(), 1u);
  std::string n;
  EXPECT_EQ(direct.query("SELECT count(*) FROM " + t + " WHERE v = 7", 5s, &n), outcome::answered);
  EXPECT_EQ(n, "1") << "the statement whose answer was lost must have committed";
  // The connection stays silent; the arming was used once: another connection is served.
  EXPECT_EQ(c.wait(500ms), outcome::silent);
  pg other(proxied_);
  ASSERT_TRUE(other.ok()) << other.error();
  EXPECT_EQ(other.query("SELECT 1", 5s), outcome::answered);
  EXPECT_EQ(proxy_->answers_lost(), 1u);
  direct.query("DROP TABLE " + t, 5s);
}

TEST_F(FaultProxy, LoseNextAnswerThenResetGivesAConnectionError) {
  pg direct(url());
  ASSERT_TRUE(direct.ok()) << direct.error();
  const auto t = table();
  ASSERT_EQ(direct.query("CREATE TABLE " + t + " (v int)", 5s), outcome::answered);
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  proxy_->lose_next_answer(true);
  EXPECT_EQ(c.query("INSERT INTO " + t + " VALUES (8)", 5s), outcome::failed);
  std::string n;
  EXPECT_EQ(direct.query("SELECT count(*) FROM " + t, 5s, &n), outcome::answered);
  EXPECT_EQ(n, "1");
  direct.query("DROP TABLE " + t, 5s);
}

TEST_F(FaultProxy, DelayDelaysEachDirection) {
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  proxy_->delay(300ms);
  const auto t0 = steady::now();
  EXPECT_EQ(c.query("SELECT 1", 10s), outcome::answered);
  EXPECT_GE(steady::now() - t0, 600ms) << "request and answer are each delayed";
  proxy_->pass();
  EXPECT_EQ(c.query("SELECT 1", 5s), outcome::answered);
}

TEST_F(FaultProxy, HoldDeliversLateInOrder) {
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  proxy_->hold();
  EXPECT_EQ(c.query("SELECT 'late'", 800ms), outcome::silent);
  proxy_->pass();
  std::string v;
  EXPECT_EQ(c.wait(5s, &v), outcome::answered);
  EXPECT_EQ(v, "late");
  EXPECT_EQ(proxy_->bytes_dropped(), 0u);
}

TEST_F(FaultProxy, CutResetsEveryConnection) {
  pg a(proxied_);
  pg b(proxied_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(proxy_->connections(), 2u);
  proxy_->cut();
  EXPECT_EQ(proxy_->connections(), 0u);
  EXPECT_EQ(proxy_->connections_cut(), 2u);
  EXPECT_EQ(a.query("SELECT 1", 5s), outcome::failed);
  EXPECT_EQ(b.query("SELECT 1", 5s), outcome::failed);
  pg again(proxied_);
  EXPECT_TRUE(again.ok()) << again.error();
}

TEST_F(FaultProxy, ControlsFromManyThreads) {
  // Many clients querying while other threads switch modes: no crash, no data race (TSan), and
  // everything works again after pass().
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] {
      while (!stop) {
        pg c(proxied_);
        if (c.ok()) c.query("SELECT 1", 300ms);
      }
    });
  }
  std::thread switcher([&] {
    for (int i = 0; i < 40; ++i) {
      switch (i % 5) {
        case 0:
          proxy_->delay(5ms);
          break;
        case 1:
          proxy_->hold();
          break;
        case 2:
          proxy_->lose_next_answer();
          break;
        case 3:
          proxy_->blackhole();
          break;
        default:
          proxy_->cut();
          break;
      }
      (void)proxy_->connections();
      std::this_thread::sleep_for(20ms);
    }
  });
  switcher.join();
  stop = true;
  for (auto& t : clients) t.join();
  proxy_->pass();
  proxy_->cut();
  pg c(proxied_);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.query("SELECT 1", 5s), outcome::answered);
}
