// Adversarial review (helper-52): mixed inventory strategies, idempotency keys, the user's own
// version-checked with_retry writer, and (PostgreSQL) connections killed mid-transaction, so that
// some COMMIT answers are lost. Every keyed request is retried with its key (and another strategy)
// until it gets a definite answer; the stock must then equal exactly what was acknowledged.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "sqllock/inventory.hpp"
#include "story_fixture.hpp"

namespace stories {
namespace {

using sqllock::stock_strategy;
using status = sqllock::reserve_result::status;

TEST(InventoryAttack, MixedStrategiesKeysAndLostAnswersNeverOversellOrApplyTwice) {
  constexpr std::int64_t initial1 = 150, initial2 = 30;
  auto admin = make_client();
  sqllock::create_idempotency_table(admin);
  const auto table = unique_name("stock_attack");
  exec(admin, "CREATE TABLE " + table + " (sku BIGINT PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
  exec(admin, "INSERT INTO " + table + " VALUES (1, ?, 1)", {initial1});
  exec(admin, "INSERT INTO " + table + " VALUES (2, ?, 1)", {initial2});
  const sqllock::stock_table st{.table = table};
  // Connections are killed on a direct PostgreSQL server only (not through PgBouncer).
  const char* direct_url = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
  const bool kill = backend().name == "postgresql" && direct_url && backend().url == direct_url;

  // Attack mode (manual): every COMMIT is applied locally, then waits for a synchronous standby
  // that never comes until the killer ends it: its answer is lost although it was applied.
  const char* syncrep_admin = std::getenv("H52_SYNCREP_ADMIN_URL");
  auto set_syncrep = [&](const char* value) {
    if (!syncrep_admin || !kill) return;
    const std::string cmd = std::string("psql '") + syncrep_admin +
                            "' -qc \"ALTER SYSTEM SET synchronous_standby_names = '" + value +
                            "'\" -c 'SELECT pg_reload_conf()' >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  set_syncrep("h52_nobody");
  std::atomic<bool> stop{false};
  std::atomic<int> kills{0}, lost_answers{0}, replays_after_loss{0}, errors{0};
  std::atomic<std::int64_t> user_acked{0}, user_unknown{0}, user_exhausted{0};
  std::mutex mu;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> applied_keys;  // key -> (q1, q2)
  const stock_strategy strategies[] = {stock_strategy::atomic_update, stock_strategy::optimistic_cas,
                                       stock_strategy::for_update};
  constexpr int workers = 6;
  std::vector<sqllock::client> clients;
  for (int i = 0; i < workers + 2; ++i) clients.push_back(make_client());
  std::vector<std::thread> threads;
  // The user's own writer, as in the README: read, then an absolute value guarded by the version.
  threads.emplace_back([&] {
    auto& c = clients[workers];
    for (int n = 0; n < 20 && !stop; ++n) {
      try {
        bool applied = false;
        sqllock::with_retry(c,
                            [&](sqllock::transaction& tx) {
                              applied = false;
                              auto row = tx.query("SELECT qty, version FROM " + table + " WHERE sku = 1");
                              const auto qty = row.at(0).as_int(0), version = row.at(0).as_int(1);
                              if (qty < 1) return;
                              tx.cas({.table = table,
                                      .key = {{"sku", std::int64_t{1}}},
                                      .version_column = "version",
                                      .expected_version = version,
                                      .set = {{"qty", qty - 1}}})
                                  .value();
                              applied = true;
                            },
                            {.max_attempts = 100,
                             .backoff_min = std::chrono::milliseconds(1),
                             .backoff_max = std::chrono::milliseconds(5),
                             .transaction = {}});
        if (applied) ++user_acked;
      } catch (const sqllock::connection_lost&) {
        ++user_unknown;  // applied or not: unknown
      } catch (const sqllock::retries_exhausted&) {
        ++user_exhausted;
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << "user writer: " << e.what();
        return;
      }
    }
  });
  for (int t = 0; t < workers; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      int sold_out = 0;
      for (int n = 0; sold_out < 3 && !stop; ++n) {
        const std::int64_t q = 1 + rng() % 3;
        const bool two = rng() % 3 == 0;
        std::vector<sqllock::stock_item> items{{std::int64_t{1}, q}};
        if (two) items.push_back({std::int64_t{2}, 1});
        sqllock::reserve_options o;
        o.max_attempts = 50;
        o.idempotency_key = table + "-" + std::to_string(t) + "-" + std::to_string(n);
        bool lost = false;
        for (int tries = 0;; ++tries) {
          o.strategy = strategies[(t + tries) % 3];  // a retry may use another strategy
          try {
            auto r = sqllock::reserve(clients[t], st, items, o);
            if (r.outcome == status::retries_exhausted) continue;
            if (lost && r.replayed) ++replays_after_loss;
            if (r.applied()) {
              std::lock_guard lk(mu);
              applied_keys[*o.idempotency_key] = {q, two ? 1 : 0};
              EXPECT_GE(r.new_quantities[0], 0);
            } else {
              ASSERT_EQ(r.outcome, status::insufficient);
              ++sold_out;
            }
            break;
          } catch (const sqllock::connection_lost&) {
            lost = true;
            ++lost_answers;  // the answer (maybe of a COMMIT) is lost: ask again with the same key
          } catch (const std::exception& e) {
            ++errors;
            ADD_FAILURE() << e.what();
            return;
          }
          if (tries > 200) {
            ADD_FAILURE() << "no definite answer after 200 tries";
            return;
          }
        }
      }
    });
  }
  std::thread killer;
  if (kill) {
    killer = std::thread([&] {
      auto& c = clients[workers + 1];
      std::mt19937 rng(7);
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 20));
        try {
          auto rows = query(c,
                            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> "
                            "pg_backend_pid() AND usename = current_user AND datname = current_database() AND "
                            "(wait_event = 'SyncRep' OR ((query ILIKE 'COMMIT%' OR query ILIKE '%" +
                                table + "%') AND state <> 'idle' AND random() < 0.3))) k");
          kills += static_cast<int>(rows.at(0).as_int(0));
        } catch (const std::exception&) {
        }
      }
    });
  }
  for (std::size_t i = 0; i < threads.size(); ++i) threads[i].join();
  stop = true;
  if (killer.joinable()) killer.join();
  set_syncrep("");

  std::int64_t acked1 = 0, acked2 = 0;
  for (const auto& [k, v] : applied_keys) {
    acked1 += v.first;
    acked2 += v.second;
  }
  // Every key the idempotency table says was applied was acknowledged as applied, and vice versa.
  auto stored = query(admin, "SELECT idem_key FROM sqllock_idempotency WHERE idem_key LIKE ? AND outcome = 'applied'",
                      {table + "-%"});
  EXPECT_EQ(stored.size(), applied_keys.size()) << "stored applied outcomes differ from acknowledged ones";
  auto rows = query(admin, "SELECT sku, qty FROM " + table + " ORDER BY sku");
  const auto q1 = rows.at(0).as_int(1), q2 = rows.at(1).as_int(1);
  std::cout << "[ attack   ] " << backend().name << ": keys applied " << applied_keys.size() << ", kills "
            << kills.load() << ", lost answers " << lost_answers.load() << " (replayed after loss "
            << replays_after_loss.load() << "), user writer acked " << user_acked.load() << " unknown "
            << user_unknown.load() << " (of which applied " << (initial1 - q1) - acked1 - user_acked.load()
            << "), exhausted " << user_exhausted.load() << ", final " << q1 << "/" << q2 << "\n";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GE(q1, 0);
  EXPECT_GE(q2, 0);
  EXPECT_EQ(initial2 - q2, acked2) << "sku 2: sold " << initial2 - q2 << ", acknowledged " << acked2;
  EXPECT_GE(initial1 - q1, acked1 + user_acked.load()) << "an acknowledged decrement of sku 1 is missing";
  EXPECT_LE(initial1 - q1, acked1 + user_acked.load() + user_unknown.load())
      << "sku 1 lost more stock than was acknowledged (applied twice?)";
  exec(admin, "DROP TABLE " + table);
}

}  // namespace
}  // namespace stories

namespace stories {
namespace {

// A replay answers for the request it is given: one quantity per item of *this* request.
TEST(InventoryAttack, AReplayUnderTheSameKeyMatchesTheRequestsItems) {
  auto c = make_client();
  sqllock::create_idempotency_table(c);
  const auto table = unique_name("stock_replay");
  exec(c, "CREATE TABLE " + table + " (sku BIGINT PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
  exec(c, "INSERT INTO " + table + " VALUES (1, 10, 1)");
  sqllock::reserve_options o;
  o.idempotency_key = unique_name("order");
  auto first = sqllock::reserve(c, {.table = table}, {{std::int64_t{1}, 3}}, o);
  ASSERT_TRUE(first.applied());
  try {
    auto again = sqllock::reserve(c, {.table = table}, {{std::int64_t{1}, 1}, {std::int64_t{1}, 2}}, o);
    EXPECT_EQ(again.new_quantities.size(), 2u)
        << "a replay with " << again.new_quantities.size() << " quantities for a request of 2 items";
  } catch (const sqllock::invalid_argument&) {
    // also acceptable: a different request under the same key
  }
  EXPECT_EQ(query(c, "SELECT qty FROM " + table + " WHERE sku = 1").at(0).as_int(0), 7);

  // The same items in another order: each quantity stays with its own item.
  exec(c, "INSERT INTO " + table + " VALUES (2, 20, 1)");
  o.idempotency_key = unique_name("order");
  auto ab = sqllock::reserve(c, {.table = table}, {{std::int64_t{1}, 1}, {std::int64_t{2}, 1}}, o);
  ASSERT_TRUE(ab.applied());
  EXPECT_EQ(ab.new_quantities, (std::vector<std::int64_t>{6, 19}));
  auto ba = sqllock::reserve(c, {.table = table}, {{std::int64_t{2}, 1}, {std::int64_t{1}, 1}}, o);
  EXPECT_TRUE(ba.replayed);
  EXPECT_EQ(ba.new_quantities, (std::vector<std::int64_t>{19, 6})) << "quantities of the stored request's order";

  // A refusal names the failing item of this request.
  o.idempotency_key = unique_name("order");
  auto no = sqllock::reserve(c, {.table = table}, {{std::int64_t{2}, 50}, {std::int64_t{1}, 1}}, o);
  ASSERT_EQ(no.outcome, status::insufficient);
  EXPECT_EQ(no.failed_item, 0u);
  auto no_again = sqllock::reserve(c, {.table = table}, {{std::int64_t{1}, 1}, {std::int64_t{2}, 50}}, o);
  EXPECT_TRUE(no_again.replayed);
  EXPECT_EQ(no_again.outcome, status::insufficient);
  EXPECT_EQ(no_again.failed_item, 1u) << "the failing item's index in the stored request";
  EXPECT_EQ(query(c, "SELECT qty FROM " + table + " WHERE sku = 1").at(0).as_int(0), 6);
  exec(c, "DROP TABLE " + table);
}

}  // namespace
}  // namespace stories
