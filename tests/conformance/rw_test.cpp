// Conformance: reader-writer leases (issue 16, Curator InterProcessReadWriteLock): many readers or one
// writer, writer preference, each holder a lease with its own token; downgrade allowed, upgrade
// refused; a writer that gives up leaves nothing held.
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "conformance/fixture.hpp"
#include "core/rw_name.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
// Counts who is inside and records any overlap a reader-writer lock forbids.
struct checker {
  std::atomic<int> readers{0}, writers{0}, max_readers{0}, violations{0};
  std::mutex mu;
  std::int64_t last_write_token = 0;
  int token_regressions = 0;

  void read_in() {
    const int r = ++readers;
    if (writers.load() != 0) ++violations;
    int seen = max_readers.load();
    while (r > seen && !max_readers.compare_exchange_weak(seen, r)) {
    }
  }
  void read_out() { --readers; }
  void write_in(std::int64_t token) {
    if (++writers != 1 || readers.load() != 0) ++violations;
    std::lock_guard lk(mu);
    if (token <= last_write_token) ++token_regressions;
    last_write_token = token;
  }
  void write_out() { --writers; }
};
}  // namespace

TEST(ReadWrite, ManyReadersAtOnceAndNoWriterBesideThem) {
  const auto name = unique_name("rw_many");
  std::vector<sqllock::client> clients;
  std::vector<sqllock::lease_guard> reads;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(make_client());
    auto g = clients.back().try_acquire_read(name);
    ASSERT_TRUE(g) << "reader " << i << " was refused beside the others";
    EXPECT_EQ(g->name(), name);
    EXPECT_EQ(g->hold_count(), 1);
    EXPECT_GT(g->fencing_token(), 0);
    reads.push_back(std::move(*g));
  }
  auto w = make_client();
  EXPECT_FALSE(w.try_acquire_write(name)) << "a writer beside four readers";
  EXPECT_THROW(w.acquire_write_for(name, 200ms), sqllock::acquire_timeout);
  // The plain lock of the same name is another thing altogether.
  EXPECT_TRUE(w.try_acquire(name));
  reads.clear();
  auto g = w.try_acquire_write(name);
  ASSERT_TRUE(g) << "no writer once the readers left";
  EXPECT_EQ(g->name(), name);
  EXPECT_FALSE(clients[0].try_acquire_read(name)) << "a reader beside the writer";
  EXPECT_FALSE(clients[1].try_acquire_write(name)) << "two writers";
}

// Threads in several clients take the read or the write lock at random; a checker counts who is
// inside: never a writer beside anyone, readers side by side, writer tokens strictly increasing.
TEST(ReadWrite, WriterExcludesReadersAndWritersUnderContention) {
  const auto name = unique_name("rw_mix");
  checker chk;
  std::atomic<int> errors{0}, writes{0}, reads{0};
  constexpr int clients = 3, threads_per_client = 2, rounds = 12;
  std::vector<sqllock::client> cs;
  for (int i = 0; i < clients; ++i) cs.push_back(make_client());
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < clients * threads_per_client; ++t) {
      threads.emplace_back([&, t] {
        std::minstd_rand rng(static_cast<unsigned>(t) * 7919u + 1u);
        auto& c = cs[static_cast<std::size_t>(t % clients)];
        try {
          for (int i = 0; i < rounds; ++i) {
            if (rng() % 3 == 0) {
              auto g = c.acquire_write_for(name, 60s, {.ttl = 10s});
              chk.write_in(g.fencing_token());
              std::this_thread::sleep_for(5ms);
              chk.write_out();
              ++writes;
            } else {
              auto g = c.acquire_read_for(name, 60s, {.ttl = 10s});
              chk.read_in();
              std::this_thread::sleep_for(15ms);
              chk.read_out();
              ++reads;
            }
          }
        } catch (const std::exception& e) {
          ++errors;
          ADD_FAILURE() << e.what();
        }
      });
    }
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(chk.violations.load(), 0) << "a writer was inside beside a reader or another writer";
  EXPECT_EQ(chk.token_regressions, 0) << "a writer's token did not grow";
  EXPECT_GT(writes.load(), 0);
  EXPECT_GE(chk.max_readers.load(), 2) << "readers were never inside side by side";
}

// A writer that took its row (its intent) but still waits for a reader keeps new readers out.
TEST(ReadWrite, WaitingWriterKeepsNewReadersOut) {
  const auto name = unique_name("rw_pref");
  auto r1 = make_client(), wc = make_client(), r2 = make_client();
  auto first = r1.acquire_read_for(name, 5s);
  std::atomic<bool> got{false};
  std::jthread writer([&] {
    try {
      auto g = wc.acquire_write_for(name, 20s);
      got = true;
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  });
  // The writer's row appears (it is waiting for `first` to drain) ...
  const auto t0 = clock::now();
  bool blocked = false;
  while (ms_since(t0) < 2000 && !(blocked = !r2.try_acquire_read(name).has_value())) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(blocked) << "the waiting writer never kept a new reader out";
  EXPECT_FALSE(got.load());
  EXPECT_FALSE(r2.try_acquire_read_for(name, 300ms)) << "a new reader passed a waiting writer";
  first.release();
  writer.join();
  EXPECT_TRUE(got.load());
}

// Writer preference (Redisson's issue 5379): a continuous stream of overlapping readers does not
// starve a writer; it waits about one read hold, and while it holds, no reader is inside.
TEST(ReadWrite, StreamOfReadersDoesNotStarveWriter) {
  const auto name = unique_name("rw_stream");
  checker chk;
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, errors{0};
  std::vector<sqllock::client> cs;
  for (int i = 0; i < 3; ++i) cs.push_back(make_client());
  std::vector<std::jthread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&, i] {
      try {
        std::this_thread::sleep_for(std::chrono::milliseconds(40 * i));  // staggered: always someone inside
        while (!stop.load()) {
          auto g = cs[static_cast<std::size_t>(i)].acquire_read_for(name, 30s, {.ttl = 10s});
          chk.read_in();
          std::this_thread::sleep_for(120ms);
          chk.read_out();
          ++reads;
        }
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  std::this_thread::sleep_for(400ms);
  auto w = make_client();
  const auto t0 = clock::now();
  std::optional<sqllock::lease_guard> g;
  try {
    g = w.acquire_write_for(name, 4s, {.ttl = 10s});
  } catch (const sqllock::acquire_timeout& e) {
    ADD_FAILURE() << "the writer starved: " << e.what();
  }
  const auto waited = ms_since(t0);
  if (g) {
    chk.write_in(g->fencing_token());
    std::this_thread::sleep_for(150ms);
    chk.write_out();
    g->release();
  }
  stop = true;
  readers.clear();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(chk.violations.load(), 0) << "a reader was inside beside the writer";
  EXPECT_LT(waited, 2500) << "writer waited " << waited << " ms behind 120 ms reads";
  EXPECT_GE(reads.load(), 6) << "the readers' stream never ran";
  RecordProperty("writer_wait_ms", static_cast<int>(waited));
}

// A reader that dies (its lease not renewed) stops blocking the writer once its lease ends.
TEST(ReadWrite, DeadReadersRowExpiresAndLetsTheWriterIn) {
  const auto name = unique_name("rw_dead");
  auto r = make_client(), w = make_client();
  auto dead = r.acquire_read_for(name, 5s, {.ttl = 800ms, .auto_renew = false});
  const auto t0 = clock::now();
  EXPECT_FALSE(w.try_acquire_write(name));
  auto g = w.acquire_write_for(name, 10s);
  const auto waited = ms_since(t0);
  EXPECT_GE(waited, 500) << "the writer came in beside a live reader";
  EXPECT_LT(waited, 5000);
  // By the reader's clock its lease is past its loss point before the database lets the writer
  // in: not usable() now. lost() waits for its client's deadline thread, which may run late.
  EXPECT_FALSE(dead.usable()) << "the dead reader's lease is usable beside the writer";
  EXPECT_TRUE(eventually([&] { return dead.lost(); }, 2s)) << "the reader's loss was never reported";
}

// Downgrade: the writer takes the read lock, releases the write lock, keeps reading. Upgrade (write
// while reading) is refused at once, changing nothing.
TEST(ReadWrite, DowngradeWorksUpgradeIsRefused) {
  const auto name = unique_name("rw_grade");
  auto a = make_client(), b = make_client(), c = make_client();
  auto w = a.acquire_write_for(name, 5s);
  auto r = a.try_acquire_read(name);
  ASSERT_TRUE(r) << "the writer could not take the read lock (downgrade)";
  EXPECT_FALSE(b.try_acquire_read(name)) << "another reader beside the writer";
  w.release();
  auto other = b.try_acquire_read(name);
  EXPECT_TRUE(other) << "readers do not share after the downgrade";
  EXPECT_FALSE(c.try_acquire_write(name)) << "a writer beside the downgraded reader";
  other.reset();

  const auto t0 = clock::now();
  EXPECT_THROW(a.acquire_write_for(name, 3s), sqllock::upgrade_refused);
  EXPECT_THROW(a.try_acquire_write(name), sqllock::upgrade_refused);
  EXPECT_LT(ms_since(t0), 1000) << "the upgrade was not refused at once";
  EXPECT_TRUE(b.try_acquire_read(name)) << "the refused upgrade left a writer row behind";
  r->release();
  EXPECT_TRUE(a.try_acquire_write(name)) << "write after the read was released";
}

// Re-entry per holder: the write lock re-enters with its token; the read lock re-enters at once
// even behind a waiting writer (it would otherwise deadlock with it).
TEST(ReadWrite, ReentryRules) {
  const auto name = unique_name("rw_reenter");
  auto a = make_client(), b = make_client();
  {
    auto w1 = a.acquire_write_for(name, 5s);
    auto w2 = a.acquire_write_for(name, 1s);
    EXPECT_EQ(w2.hold_count(), 2);
    EXPECT_EQ(w2.fencing_token(), w1.fencing_token());
    // Another thread of the same client (per_thread scope) is another holder.
    std::jthread t([&] { EXPECT_FALSE(a.try_acquire_write(name)); });
  }
  auto r1 = a.acquire_read_for(name, 5s);
  std::atomic<bool> got{false};
  std::jthread writer([&] {
    try {
      auto g = b.acquire_write_for(name, 20s);
      got = true;
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  });
  std::this_thread::sleep_for(300ms);  // the writer holds its row and waits for r1
  const auto t0 = clock::now();
  auto r2 = a.acquire_read_for(name, 5s);
  EXPECT_LT(ms_since(t0), 1000) << "a re-entered read waited behind the writer";
  EXPECT_EQ(r2.hold_count(), 2);
  EXPECT_EQ(r2.fencing_token(), r1.fencing_token());
  EXPECT_FALSE(got.load());
  r2.release();
  EXPECT_FALSE(got.load()) << "the writer came in beside an outer read hold";
  r1.release();
  writer.join();
  EXPECT_TRUE(got.load());
}

// holder_scope::per_client makes the client one holder: every thread of it re-enters. A read asked
// by one thread while another thread of the client waits for readers to drain with its writer row
// stored is that holder's downgrade: it is granted at once (never behind the client's own writer,
// which would wait for it), and the writer, once the other client's reader is gone, does not wait
// for it either. Other clients stay out: no reader beside the writer row, no writer beside the
// read that remains after the write is released.
TEST(ReadWrite, APerClientScopeIsOneHolderItsReadBesideItsOwnDrainingWriterIsADowngrade) {
  const auto name = unique_name("rw_per_client");
  auto x = make_client({.holder_id = unique_name("rw-x"), .scope = sqllock::holder_scope::per_client});
  auto other = make_client(), third = make_client();
  auto r = other.acquire_read_for(name, 5s);
  std::optional<sqllock::lease_guard> w;
  std::atomic<bool> writing{false};
  std::jthread writer([&] {
    w = x.acquire_write_for(name, 20s);
    writing = true;
  });
  // The writer row is stored (new readers are kept out) while the other client's reader holds.
  const auto until = clock::now() + 10s;
  while (third.try_acquire_read(name) && clock::now() < until) std::this_thread::sleep_for(20ms);
  ASSERT_FALSE(third.try_acquire_read(name)) << "the writer row of x never kept readers out";
  EXPECT_FALSE(writing.load());
  const auto t0 = clock::now();
  auto mine = x.acquire_read_for(name, 3s);
  EXPECT_LT(ms_since(t0), 1000) << "the client's read waited behind its own writer";
  EXPECT_FALSE(writing.load()) << "the writer came in beside the other client's reader";
  EXPECT_FALSE(third.try_acquire_write(name));
  r.release();
  writer.join();
  ASSERT_TRUE(w) << "the writer waited for its own client's read";
  EXPECT_FALSE(third.try_acquire_read(name)) << "another client read beside the write lock";
  w->release();
  EXPECT_FALSE(third.try_acquire_write(name)) << "another client wrote beside the read that remained";
  EXPECT_TRUE(third.try_acquire_read(name)) << "readers do not share after the write was released";
  mine.release();
  EXPECT_TRUE(third.try_acquire_write(name));
}

// A writer that times out or is cancelled while readers drain frees its row: readers come again.
TEST(ReadWrite, WriterThatGivesUpLeavesNothingHeld) {
  const auto name = unique_name("rw_cancel");
  auto r = make_client(), w = make_client(), other = make_client();
  auto read = r.acquire_read_for(name, 5s);
  EXPECT_THROW(w.acquire_write_for(name, 300ms), sqllock::acquire_timeout);
  EXPECT_TRUE(other.try_acquire_read(name)) << "a timed-out writer left its row held";
  EXPECT_FALSE(w.try_acquire_write_for(name, 200ms));
  EXPECT_TRUE(other.try_acquire_read(name)) << "a try_acquire_write_for left its row held";

  std::stop_source stop;
  std::atomic<bool> was_cancelled{false};
  std::jthread writer([&] {
    try {
      auto g = w.acquire_write(name, {}, stop.get_token());
    } catch (const sqllock::cancelled&) {
      was_cancelled = true;
    }
  });
  const auto t0 = clock::now();
  bool kept_out = false;
  while (ms_since(t0) < 3000 && !(kept_out = !other.try_acquire_read(name).has_value())) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(kept_out) << "the waiting writer did not keep readers out";
  stop.request_stop();
  writer.join();
  EXPECT_TRUE(was_cancelled.load());
  EXPECT_TRUE(other.try_acquire_read(name)) << "a cancelled writer left its row held";
  read.release();
  EXPECT_TRUE(other.try_acquire_write(name));
}

// A reader that queued behind a waiting writer's preference gets in once that writer gives up,
// well before the writer's lease TTL: the preference ends with the writer's wait.
TEST(ReadWrite, ReadersWaitingBehindAWriterThatTimesOutGetIn) {
  const auto name = unique_name("rw_pref_timeout");
  auto r1 = make_client(), wc = make_client(), r2 = make_client();
  auto first = r1.acquire_read_for(name, 5s, {.ttl = 60s});
  std::atomic<bool> writer_timed_out{false};
  clock::time_point writer_gave_up{};
  std::jthread writer([&] {
    try {
      auto g = wc.acquire_write_for(name, 2000ms, {.ttl = 60s});
      ADD_FAILURE() << "the writer got in beside a live reader";
    } catch (const sqllock::acquire_timeout&) {
      writer_gave_up = clock::now();
      writer_timed_out = true;
    }
  });
  const auto t0 = clock::now();
  bool blocked = false;
  while (ms_since(t0) < 1500 && !(blocked = !r2.try_acquire_read(name).has_value())) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(blocked) << "the waiting writer never kept a new reader out";
  // r2 now waits behind the writer's preference; the writer gives up about 2 s into its wait.
  std::optional<sqllock::lease_guard> second;
  EXPECT_NO_THROW(second = r2.acquire_read_for(name, 20s)) << "a reader stayed out after the writer gave up";
  const auto got_at = clock::now();
  writer.join();
  ASSERT_TRUE(writer_timed_out.load());
  ASSERT_TRUE(second);
  EXPECT_GE(got_at, writer_gave_up - 500ms) << "the reader passed a writer still waiting";
  EXPECT_LT(got_at - writer_gave_up, 10s) << "the reader waited for the writer's lease, not its wait";
}

// One fencing sequence per name (DESIGN.md, Safety): every acquisition of the name, read or write,
// by any client or scope, after a release, a downgrade or an expired lease, gets a token strictly
// greater than every token the name had before. Tokens are recorded in grant order.
TEST(ReadWrite, EveryAcquisitionOfTheNameGetsAGreaterToken) {
  const auto name = unique_name("rw_fence");
  std::vector<std::pair<std::string, std::int64_t>> grants;  // (who, token) in grant order
  auto grant = [&](const std::string& who, const sqllock::lease_guard& g) {
    grants.emplace_back(who, g.fencing_token());
  };
  auto c1 = make_client(), c2 = make_client();
  {
    auto r = c1.acquire_read_for(name, 5s);  // reader A, client 1
    grant("read c1", r);
  }
  {
    auto w = c2.acquire_write_for(name, 5s);  // a writer of another client
    grant("write c2", w);
  }
  {
    auto c3 = make_client();  // a client that never read this name
    auto r = c3.acquire_read_for(name, 5s);
    grant("read new client c3", r);
  }
  {
    // Interleaved readers of several clients, all held at once.
    std::vector<sqllock::client> cs;
    std::vector<sqllock::lease_guard> held;
    for (int i = 0; i < 4; ++i) {
      cs.push_back(make_client());
      held.push_back(cs.back().acquire_read_for(name, 5s));
      grant("read held c" + std::to_string(4 + i), held.back());
      held.push_back(c1.acquire_read_for(name, 5s));  // client 1 again, beside them (re-entered after the first)
      if (i == 0) grant("read c1 again", held.back());
    }
  }
  {
    // Downgrade: the writer takes the read lock while it holds the write lock.
    auto w = c1.acquire_write_for(name, 5s);
    grant("write c1", w);
    auto r = c1.acquire_read_for(name, 5s);
    grant("read c1 (downgrade)", r);
    w.release();
  }
  {
    // A read lease that expires unrenewed; the same holder reads again, then a writer comes.
    auto dead = c2.acquire_read_for(name, 5s, {.ttl = 300ms, .auto_renew = false});
    grant("read c2 (left to expire)", dead);
    std::this_thread::sleep_for(600ms);
    auto r = c2.acquire_read_for(name, 5s);
    grant("read c2 after expiry", r);
  }
  {
    auto w = c2.acquire_write_for(name, 5s);
    grant("write c2 again", w);
  }
  std::string log;
  for (const auto& [who, token] : grants) log += "  " + who + ": " + std::to_string(token) + "\n";
  for (std::size_t i = 1; i < grants.size(); ++i) {
    EXPECT_GT(grants[i].second, grants[i - 1].second)
        << grants[i].first << " got token " << grants[i].second << ", not above " << grants[i - 1].first
        << "'s " << grants[i - 1].second << "; grants in order:\n"
        << log;
  }
}

// A reader-writer name used before its fence row existed (an older sqllock: every row its own
// sequence) keeps growing: the fence starts above every token of the name's rows.
TEST(ReadWrite, TokensGrowPastRowsFromBeforeTheFence) {
  const auto table = unique_name("rw_old");
  auto c = make_client({.table = table, .require_schema = false});
  c.migrate();
  const auto name = unique_name("rw_old_name");
  {
    auto tx = c.begin();
    const std::string insert = "INSERT INTO " + table + " (name, token, hold_count) VALUES (?, ?, 0)";
    tx.execute(insert, {sqllock::detail::rw_writer_row(name), std::int64_t{1000}});
    tx.execute(insert, {sqllock::detail::rw_reader_row(name, std::string(32, 'a'), 7), std::int64_t{2000}});
    tx.commit();
  }
  auto other = make_client({.table = table});
  auto r = other.acquire_read_for(name, 5s);
  EXPECT_GT(r.fencing_token(), 2000) << "a reader of a name used before came in below its old reader's token";
  const auto rt = r.fencing_token();
  r.release();
  auto w = c.acquire_write_for(name, 5s);
  EXPECT_GT(w.fencing_token(), rt) << "the writer's token is not above the reader's before it";
}

TEST(ReadWrite, BadInputIsRefused) {
  auto a = make_client();
  EXPECT_THROW(a.try_acquire_read(""), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_write(std::string(256, 'x')), sqllock::invalid_argument);
  EXPECT_THROW(a.acquire_read_for("x", -1ms), sqllock::invalid_argument);
  EXPECT_THROW(a.acquire_write_for("x", 1s, {.ttl = 0ms}), sqllock::invalid_argument);
}

// A write hold of a reader-writer lease guards a transaction (transaction::require_lease) like a
// lock's lease: the check reads the writer row the hold owns. Live, the guarded write commits. Once
// the lease expired on the database's clock and another writer, then a reader, took the name over,
// the guard is refused with lease_lost and the transaction's write is not committed, also while the
// holder's own client has not reported the loss (its deadline thread is held up, as a paused
// process's would be), so the database's row decides, not lost().
TEST(ReadWrite, AWriteHoldGuardsATransactionUntilItIsTakenOver) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name("rw_guard");
  {
    auto w = a.try_acquire_write(name);
    ASSERT_TRUE(w);
    auto tx = a.begin();
    tx.require_lease(*w);
    tx.execute("UPDATE " + t.name() + " SET qty = 11 WHERE id = ?", {std::int64_t{1}});
    tx.commit();
    EXPECT_EQ(t.qty(1), 11) << "a live write hold's guarded write was not committed";
  }
  deadline_stall stall(a);
  ASSERT_TRUE(stall.holding()) << "the deadline thread was never held up";
  for (const bool by_reader : {false, true}) {
    SCOPED_TRACE(by_reader ? "taken over by a reader" : "taken over by a writer");
    auto w = a.try_acquire_write(name, {.ttl = 200ms, .auto_renew = false});
    ASSERT_TRUE(w);
    std::optional<sqllock::lease_guard> taker;
    if (by_reader) {
      taker = b.acquire_read_for(name, 5s);
    } else {
      taker = b.acquire_write_for(name, 5s);
    }
    ASSERT_FALSE(w->lost()) << "not the case under test: the loss was reported before the guard";
    {
      auto tx = a.begin();
      tx.execute("UPDATE " + t.name() + " SET qty = 99 WHERE id = ?", {std::int64_t{1}});
      EXPECT_THROW(tx.require_lease(*w), sqllock::lease_lost) << "the guard passed on a write hold taken over";
      EXPECT_THROW(tx.commit(), sqllock::lease_lost);
    }
    EXPECT_EQ(t.qty(1), 11) << "a write of a transaction guarded by a taken-over write hold was committed";
    taker->release();
  }
}

// A guarded transaction of a write hold keeps the name's readers out, as it keeps a takeover of a
// lock out (Fencing.AGuardedTransactionHoldsOffTakeoverUntilItEnds): the writer is paused past its
// TTL with the transaction open, and a reader comes in only after the transaction has ended, so the
// guarded write never commits while a reader holds the name.
TEST(ReadWrite, AGuardedWriteHoldKeepsReadersOutUntilItsTransactionEnds) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name("rw_guard_readers");
  auto w = a.try_acquire_write(name, {.ttl = 300ms, .auto_renew = false});
  ASSERT_TRUE(w);
  auto tx = a.begin();
  tx.require_lease(*w);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  std::atomic<clock::rep> entered{0};
  std::jthread reader([&] {
    auto r = b.acquire_read_for(name, 20s, {.ttl = 5s});
    entered = clock::now().time_since_epoch().count();
  });
  std::this_thread::sleep_for(500ms);  // the writer "pauses" past its TTL, its transaction still open
  EXPECT_EQ(entered.load(), 0) << "a reader came in while a guarded transaction of the write hold was open";
  const auto committed = clock::now();
  tx.commit();
  reader.join();
  ASSERT_NE(entered.load(), 0);
  EXPECT_GE(clock::time_point(clock::duration(entered.load())), committed);
  EXPECT_EQ(t.qty(1), 11);
}

// The reader's look at the writer row waits for a guarded transaction only when the writer's lease
// is no longer live (the case above): beside a live writer a reader steps aside at once, so a
// try_acquire_read answers at once while the writer's guarded transaction stays open. (A locking
// read alone made it wait for the transaction to end, up to the 10 s statement bound.)
TEST(ReadWrite, ATryReadBesideALiveWriterInAGuardedTransactionAnswersAtOnce) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name("rw_guard_try");
  auto w = a.try_acquire_write(name, {.ttl = 10s});
  ASSERT_TRUE(w);
  auto tx = a.begin();
  tx.require_lease(*w);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  std::atomic<int> answer{-1};  // -1: no answer yet; 0: not acquired; 1: acquired
  std::jthread reader([&] { answer = b.try_acquire_read(name).has_value() ? 1 : 0; });
  const auto until = clock::now() + 3s;
  while (answer.load() < 0 && clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(answer.load(), 0) << "-1: the try waited for the live writer's guarded transaction; 1: it was acquired beside the writer";
  tx.commit();
  reader.join();
  EXPECT_EQ(answer.load(), 0);
  EXPECT_EQ(t.qty(1), 11);
}

// The round trips of a read acquire when no writer is there, the common case: the reader row's
// acquire and one look at the writer row, as many statements as a write acquire beside no reader
// (the writer row's acquire and one look at the readers). PostgreSQL and MariaDB look with a
// locking read that does not wait, which answers when nothing holds the writer row; the plain read
// before it is sent only when it meets a row lock (before: always, one statement more).
TEST(ReadWrite, AReadAcquireBesideNoWriterCostsWhatAWriteAcquireBesideNoReaderCosts) {
  auto a = make_client();
  auto statements = [&](auto acquire) {
    const auto before = a.statement_count();
    auto g = acquire();
    EXPECT_TRUE(g);
    const auto sent = a.statement_count() - before;
    if (g) g->release();
    return sent;
  };
  const sqllock::lease_options once{.auto_renew = false};
  ASSERT_TRUE(a.try_acquire(unique_name("rw_round_trips_warm"), once));  // connections open, statements prepared
  // A name's first acquire (its fencing row is created on the way).
  const auto first_read = statements([&] { return a.try_acquire_read(unique_name("rw_round_trips_r"), once); });
  const auto first_write = statements([&] { return a.try_acquire_write(unique_name("rw_round_trips_w"), once); });
  EXPECT_EQ(first_read, first_write) << "a name's first read acquire against its first write acquire";
  // A name whose writer row was held and released.
  const auto name = unique_name("rw_round_trips");
  EXPECT_TRUE(a.try_acquire_write(name, once));
  const auto write = statements([&] { return a.try_acquire_write(name, once); });
  const auto read = statements([&] { return a.try_acquire_read(name, once); });
  EXPECT_EQ(read, write) << "a read acquire after a write hold was released, against a write acquire";
}

// The other way round: a guarded transaction of a read hold keeps the writer out until it ends
// (transaction::require_lease: a write made in a guarded transaction commits only while the lease
// is held). The reader pauses past its TTL with the transaction open; the writer's drain sees no
// live reader (its locking look that does not wait meets the guard's lock, its plain look finds
// no live reader), and its waiting locking look waits for the guard's transaction.
TEST(ReadWrite, AGuardedReadHoldKeepsTheWriterOutUntilItsTransactionEnds) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name("rw_guard_writer");
  auto r = a.try_acquire_read(name, {.ttl = 300ms, .auto_renew = false});
  ASSERT_TRUE(r);
  auto tx = a.begin();
  tx.require_lease(*r);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  std::atomic<clock::rep> entered{0};
  std::jthread writer([&] {
    auto w = b.acquire_write_for(name, 20s, {.ttl = 5s});
    entered = clock::now().time_since_epoch().count();
  });
  std::this_thread::sleep_for(500ms);  // the reader "pauses" past its TTL, its transaction still open
  EXPECT_EQ(entered.load(), 0) << "a writer came in while a guarded transaction of a read hold was open";
  const auto committed = clock::now();
  tx.commit();
  writer.join();
  ASSERT_NE(entered.load(), 0);
  EXPECT_GE(clock::time_point(clock::duration(entered.load())), committed);
  EXPECT_EQ(t.qty(1), 11);
}

// A hold released while a transaction it guards is still open (a guard going out of scope before
// the commit, a cleanup thread releasing after on_lost): the other side must still wait for that
// transaction. On PostgreSQL the release's plain UPDATE passes the guard's FOR KEY SHARE, and the
// other side's check looked only at rows naming a holder, so before the release waited for the
// guard a reader (or writer) came in beside the uncommitted guarded write.
namespace {
void released_inside_its_guarded_transaction_keeps_the_other_side_out(bool write_hold) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name(write_hold ? "rw_rel_guard_w" : "rw_rel_guard_r");
  auto held = write_hold ? a.try_acquire_write(name, {.ttl = 10s}) : a.try_acquire_read(name, {.ttl = 10s});
  ASSERT_TRUE(held);
  auto tx = a.begin();
  tx.require_lease(*held);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  const auto t0 = clock::now();
  held->release();  // inside the transaction: returns at once, the row is freed when it ends
  EXPECT_LT(ms_since(t0), 2000) << "the release waited for its own open transaction";
  std::atomic<clock::rep> entered{0};
  std::jthread other([&] {
    auto g = write_hold ? b.acquire_read_for(name, 20s) : b.acquire_write_for(name, 20s, {.ttl = 5s});
    entered = clock::now().time_since_epoch().count();
  });
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(entered.load(), 0) << "the " << (write_hold ? "reader" : "writer")
                               << " came in while the released hold's guarded transaction was open";
  const auto committed = clock::now();
  tx.commit();
  other.join();
  ASSERT_NE(entered.load(), 0);
  const auto in = clock::time_point(clock::duration(entered.load()));
  EXPECT_GE(in, committed);
  EXPECT_LT(in - committed, 3s) << "the release was not sent when the guarded transaction ended";
  EXPECT_EQ(t.qty(1), 11);
}
}  // namespace

TEST(ReadWrite, AWriteHoldReleasedInsideItsGuardedTransactionKeepsReadersOutUntilItEnds) {
  released_inside_its_guarded_transaction_keeps_the_other_side_out(true);
}

TEST(ReadWrite, AReadHoldReleasedInsideItsGuardedTransactionKeepsTheWriterOutUntilItEnds) {
  released_inside_its_guarded_transaction_keeps_the_other_side_out(false);
}

// A transaction that guards two holds keeps both guarded until it ends. The transaction kept one
// guard mark, so the second require_lease ended the first one's: a release of the first hold was
// then sent at once (PostgreSQL: a reader came in beside the uncommitted write; MariaDB: the release
// waited for its own transaction; SQLite: 'database is locked').
TEST(ReadWrite, ATransactionGuardingTwoHoldsKeepsTheFirstGuardedUntilItEnds) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto first = unique_name("rw_two_guards_a");
  const auto second = unique_name("rw_two_guards_b");
  auto w1 = a.try_acquire_write(first, {.ttl = 10s});
  auto w2 = a.try_acquire_write(second, {.ttl = 10s});
  ASSERT_TRUE(w1);
  ASSERT_TRUE(w2);
  auto tx = a.begin();
  tx.require_lease(*w1);
  tx.require_lease(*w2);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  const auto t0 = clock::now();
  w1->release();
  EXPECT_LT(ms_since(t0), 2000) << "the release waited for its own open transaction";
  EXPECT_FALSE(b.try_acquire_read(first)) << "a reader came in while the transaction guarding the first hold was open";
  tx.commit();
  EXPECT_TRUE(b.try_acquire_read_for(first, 3s)) << "the release was not sent when the transaction ended";
  EXPECT_EQ(t.qty(1), 11);
}
