// Conformance: fair mode (issue 16, ZooKeeper's sequential nodes): tickets in a queue per name, the
// lock only to the lowest live ticket, direct hand-over on release, a dead waiter's ticket
// expiring, cancelled waiters leaving nothing behind, and the rule for plain acquirers; schema 4.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

#include <iostream>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {

sqllock::lease_options fair(std::chrono::milliseconds ticket_ttl = 2000ms, std::chrono::milliseconds ttl = 10s) {
  sqllock::lease_options o;
  o.ttl = ttl;
  o.fair = true;
  o.fair_ticket_ttl = ticket_ttl;
  return o;
}

sqllock::client labelled(const std::string& label) {
  sqllock::client_options o;
  o.holder_id = label;
  return make_client(o);
}

/// The labels of the live waiters of `name`, in queue order.
std::vector<std::string> waiters(sqllock::client& c, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& w : c.list_queue()) {
    if (w.name == name) out.push_back(w.holder);
  }
  return out;
}

/// Wait (up to 10 s) until `name` has `n` live waiters.
bool wait_for_waiters(sqllock::client& c, const std::string& name, std::size_t n) {
  const auto until = clock::now() + 10s;
  while (clock::now() < until) {
    if (waiters(c, name).size() == n) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

// Waiters of five clients, queued one after the other, get the lock in that order, each with a
// greater token; `list_queue` shows them in order with their labels and how long they waited.
TEST(Fair, GrantsFollowTicketOrderAcrossClients) {
  const auto name = unique_name("fair_fifo");
  auto admin = make_client();
  auto holder = labelled("fair-holder");
  auto first = holder.acquire_for(name, 10s, fair());
  constexpr int n = 5;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::int64_t> tokens;
  std::atomic<int> errors{0};
  std::vector<std::jthread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto c = labelled("fair-w" + std::to_string(i));
        auto g = c.acquire_for(name, 60s, fair());
        {
          std::lock_guard lk(mu);
          order.push_back(i);
          tokens.push_back(g.fencing_token());
        }
        std::this_thread::sleep_for(20ms);
        g.release();
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
    ASSERT_TRUE(wait_for_waiters(admin, name, static_cast<std::size_t>(i + 1))) << "waiter " << i << " took no ticket";
  }
  const auto queue = admin.list_queue();
  std::vector<std::string> labels;
  for (const auto& w : queue) {
    if (w.name != name) continue;
    labels.push_back(w.holder);
    EXPECT_GE(w.waited.count(), 0);
    EXPECT_GT(w.time_left.count(), 0);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"fair-w0", "fair-w1", "fair-w2", "fair-w3", "fair-w4"}));
  first.release();
  threads.clear();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4})) << "grants out of ticket order";
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(tokens[static_cast<std::size_t>(i)], first.fencing_token() + 1 + i);
  EXPECT_TRUE(waiters(admin, name).empty()) << "tickets left behind";
  EXPECT_FALSE(admin.inspect(name)) << "the lock is still held after the last release";
}

// The release of a fair holder hands the row to the next ticket in the same statement: right after
// it the row already names the waiter with token + 1 (there is no free moment a plain acquirer
// could take), and the waiter's guard carries that token.
TEST(Fair, ReleaseHandsTheLockToTheNextTicketWithTheNextToken) {
  const auto name = unique_name("fair_handover");
  auto a = labelled("fair-a");
  auto b = labelled("fair-b");
  auto c = make_client();
  auto ga = a.acquire_for(name, 10s, fair());
  std::optional<sqllock::lease_guard> gb;
  std::jthread waiter([&] { gb = b.acquire_for(name, 30s, fair()); });
  ASSERT_TRUE(wait_for_waiters(c, name, 1));
  ga.release();
  const auto row = c.inspect(name);
  ASSERT_TRUE(row) << "the row was freed instead of handed over";
  EXPECT_EQ(row->holder, "fair-b");
  EXPECT_EQ(row->fencing_token, ga.fencing_token() + 1);
  EXPECT_FALSE(c.try_acquire(name)) << "a plain acquirer took the lock from the queue";
  waiter.join();
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->fencing_token(), ga.fencing_token() + 1);
  EXPECT_EQ(gb->holder_id(), "fair-b");
  gb->release();
  EXPECT_FALSE(c.inspect(name));
}

// A waiter first in line that a release hands the lock to, woken by the release's event, takes it
// with one statement (the queue read answers the handed lease, which its watchdog then extends;
// MariaDB's read also takes the holder's wake-up lock) instead of
// reading the queue first and then acquiring: one round trip between the hand-over and the new
// holder's return (issue 16's contention target). Without cross-process events it learns of the
// hand-over by its poll: that poll alone, or the poll and the acquire.
TEST(Fair, AWaiterFirstInLineTakesAHandOverWithOneStatement) {
  const auto name = unique_name("fair_one_stmt");
  auto a = labelled("fair-a");
  sqllock::client_options bo = events_only_options();
  bo.holder_id = "fair-b";
  if (hooks().transaction_pooler) bo.poll_min = bo.poll_max = 1s;  // no events: its poll finds the hand-over
  auto b = make_client(bo);
  auto admin = make_client();
  auto ga = a.acquire_for(name, 10s, fair(20s));
  std::optional<sqllock::lease_guard> gb;
  std::jthread waiter([&] { gb = b.acquire_for(name, 30s, fair(20s)); });
  ASSERT_TRUE(wait_for_waiters(admin, name, 1));
  // Until the waiter has polled as first in line and is waiting (no statement for 300 ms).
  auto count = b.statement_count();
  for (auto still = clock::now(); clock::now() - still < 300ms;) {
    std::this_thread::sleep_for(20ms);
    if (b.statement_count() != count) {
      count = b.statement_count();
      still = clock::now();
    }
  }
  ga.release();
  waiter.join();
  ASSERT_TRUE(gb);
  EXPECT_EQ(gb->fencing_token(), ga.fencing_token() + 1);
  const auto sent = b.statement_count() - count;
  if (hooks().multi_primary) {
    // Galera: not pinned. Its waker reads the lock rows instead of waiting on GET_LOCK (which
    // does not cross nodes); a CI run saw 3 statements once, cause not established. Bounded: the
    // waiter does not poll its way in.
    std::cout << "[ fair ] " << hooks().name << ": " << sent << " statements between the hand-over and the new holder's return\n";
    EXPECT_LE(sent, 4u) << "statements between the hand-over and the new holder's return";
  } else if (hooks().cross_process_wake && !hooks().transaction_pooler) {
    EXPECT_EQ(sent, 1u) << "statements between the hand-over and the new holder's return";
  } else {
    // Found by its poll: a read-only poll that answers the handed lease (PostgreSQL, SQLite) is
    // the only statement; a renewal poll, or a backend whose poll does not answer it, adds the acquire.
    EXPECT_GE(sent, 1u);
    EXPECT_LE(sent, 2u) << "statements between the hand-over and the new holder's return";
  }
  gb->release();
}

// A waiter killed while queued: its ticket expires after its TTL, so the waiter behind it gets the
// lock within about that TTL, even when the lock was handed to the dead waiter first (the handed
// lease lasts one ticket TTL). The stall is printed for bench/RESULTS.md.
TEST(Fair, DeadWaitersTicketExpiresAndTheQueueMovesOn) {
  const auto name = unique_name("fair_dead");
  constexpr auto ticket_ttl = 500ms;
  auto admin = make_client();
  auto a = labelled("fair-a");
  auto ga = a.acquire_for(name, 10s, fair(ticket_ttl));
  const int pid = spawn_child("fair_wait", {name, std::to_string(ticket_ttl.count()), "fair-doomed"});
  ASSERT_TRUE(wait_for_waiters(admin, name, 1)) << "the child took no ticket";
  auto b = labelled("fair-b");
  std::optional<sqllock::lease_guard> gb;
  clock::time_point got{};
  std::jthread waiter([&] {
    gb = b.acquire_for(name, 30s, fair(ticket_ttl));
    got = clock::now();
  });
  ASSERT_TRUE(wait_for_waiters(admin, name, 2));
  EXPECT_EQ(waiters(admin, name), (std::vector<std::string>{"fair-doomed", "fair-b"}));
  kill(pid, SIGKILL);
  const auto killed = clock::now();
  ga.release();  // handed to the dead child: its lease lasts one ticket TTL
  waiter.join();
  wait_child(pid);
  ASSERT_TRUE(gb);
  const auto stall = std::chrono::duration_cast<std::chrono::milliseconds>(got - killed);
  std::cout << "[ fair ] " << hooks().name << ": dead waiter stall " << stall.count() << " ms (ticket TTL "
            << ticket_ttl.count() << " ms)\n";
  EXPECT_LE(stall, ticket_ttl + 1500ms) << "the queue stalled too long behind a dead waiter";
  EXPECT_EQ(gb->fencing_token(), ga.fencing_token() + 2) << "hand-over to the dead child, then a takeover";
}

// A waiter cancelled (stop token) or timed out leaves no ticket, and the next release frees the lock
// instead of handing it to the departed waiter.
TEST(Fair, CancelledOrTimedOutWaiterLeavesNoTicketAndGetsNothing) {
  const auto name = unique_name("fair_cancel");
  auto admin = make_client();
  auto a = make_client();
  auto b = labelled("fair-b");
  auto ga = a.acquire_for(name, 10s, fair());
  std::stop_source stop;
  std::atomic<bool> was_cancelled{false};
  std::jthread waiter([&] {
    try {
      (void)b.acquire(name, fair(), stop.get_token());
    } catch (const sqllock::cancelled&) {
      was_cancelled = true;
    }
  });
  ASSERT_TRUE(wait_for_waiters(admin, name, 1));
  stop.request_stop();
  waiter.join();
  EXPECT_TRUE(was_cancelled.load());
  EXPECT_TRUE(waiters(admin, name).empty()) << "the cancelled waiter's ticket is still queued";
  EXPECT_THROW(b.acquire_for(name, 300ms, fair()), sqllock::acquire_timeout);
  EXPECT_TRUE(waiters(admin, name).empty()) << "the timed-out waiter's ticket is still queued";
  EXPECT_FALSE(b.try_acquire(name, fair()));
  EXPECT_TRUE(waiters(admin, name).empty()) << "a refused single try left its ticket";
  ga.release();
  EXPECT_FALSE(admin.inspect(name)) << "the lock was handed to a waiter that had left";
}

// Plain acquirers take no ticket and can take the lock only while it is free: a fair holder's
// release goes to the fair waiter even when a plain waiter waited longer; once the queue is empty,
// the plain waiter gets it. A fair single try does not jump a queued waiter.
TEST(Fair, PlainAcquirersNeverTakeTheLockFromTheQueue) {
  const auto name = unique_name("fair_mixed");
  auto admin = make_client();
  auto a = make_client();
  auto plain = labelled("plain");
  auto fairc = labelled("fair-w");
  auto ga = a.acquire_for(name, 10s, fair());
  std::optional<sqllock::lease_guard> gp, gf;
  std::atomic<int> plain_at{0}, fair_at{0}, seq{0};
  std::jthread pw([&] {
    gp = plain.acquire_for(name, 30s, {.ttl = 10s});
    plain_at = ++seq;
    std::this_thread::sleep_for(50ms);
    gp->release();
  });
  std::this_thread::sleep_for(200ms);  // the plain waiter is waiting first
  std::jthread fw([&] {
    gf = fairc.acquire_for(name, 30s, fair());
    fair_at = ++seq;
    std::this_thread::sleep_for(200ms);
    gf->release();
  });
  ASSERT_TRUE(wait_for_waiters(admin, name, 1));
  auto other = make_client();
  EXPECT_FALSE(other.try_acquire(name, fair())) << "a fair single try jumped a queued waiter";
  ga.release();
  pw.join();
  fw.join();
  EXPECT_EQ(fair_at.load(), 1) << "the plain waiter took the lock from the fair queue";
  EXPECT_EQ(plain_at.load(), 2);
  ASSERT_TRUE(gp && gf);
  EXPECT_GT(gp->fencing_token(), gf->fencing_token());
}

// A guarded transaction holds off every takeover until it ends (transaction::require_lease), also
// when its lease is released while the transaction is still open (a cleanup thread releasing after
// on_lost, a guard that goes out of scope before the transaction commits). A plain release frees
// the row and the next acquire's takeover waits for the transaction; a fair release hands the row
// over in the same statement, and the grantee's acquire then finds its own live lease: neither may
// let the next holder in, or write, before the guarded transaction has ended.
TEST(Fair, AGuardedTransactionHoldsOffTheHandOverOfItsReleasedLease) {
  auto a = labelled("guard-a");
  auto b = labelled("guard-b");
  user_table t(a, {{1, 10}});
  const auto name = unique_name("fair_guard");
  auto g = a.try_acquire(name, fair(2s, 500ms));
  ASSERT_TRUE(g);
  auto tx = a.begin();
  tx.require_lease(*g);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  std::atomic<clock::rep> entered{0};
  std::jthread taker([&] {
    auto h = b.acquire_for(name, 20s, fair(2s, 5s));
    entered = clock::now().time_since_epoch().count();
  });
  ASSERT_TRUE(wait_for_waiters(a, name, 1)) << "b took no ticket";
  try {
    g->release();  // the transaction is still open
  } catch (const sqllock::error&) {
    // Held off by the guard (MariaDB, SQLite) until its bound: re-sent in the background.
  }
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(entered.load(), 0) << "the lock was handed on while a guarded transaction of its lease was open";
  const auto committed = clock::now();
  tx.commit();
  taker.join();
  ASSERT_NE(entered.load(), 0);
  EXPECT_GE(clock::time_point(clock::duration(entered.load())), committed);
  EXPECT_EQ(t.qty(1), 11);
}

// A fair holder whose release is kept by min_hold (ShedLock's lockAtLeastFor: the row is shortened
// to end at acquired_at + min_hold, not handed over) leaves the queue in that release too. Its
// ticket, still live from its last poll, would otherwise count as a waiter ahead of every other
// once the row ends, and the next waiter would wait for it to expire (up to fair_ticket_ttl).
TEST(Fair, AReleaseKeptByMinHoldLeavesTheQueueSoTheNextWaiterGetsTheLockWhenMinHoldEnds) {
  const auto name = unique_name("fair_min_hold");
  constexpr auto ticket_ttl = 5000ms;
  constexpr auto min_hold = 300ms;
  auto admin = make_client();
  auto a = labelled("fair-a");
  auto b = labelled("fair-b");
  auto oa = fair(ticket_ttl);
  oa.min_hold = min_hold;
  const auto before = clock::now();  // before the database's acquired_at of ga
  auto ga = a.acquire_for(name, 10s, oa);
  std::optional<sqllock::lease_guard> gb;
  clock::time_point got{};
  std::jthread waiter([&] {
    gb = b.acquire_for(name, 30s, fair(ticket_ttl));
    got = clock::now();
  });
  ASSERT_TRUE(wait_for_waiters(admin, name, 1));
  ga.release();
  const auto released = clock::now();
  EXPECT_TRUE(admin.inspect(name)) << "min_hold did not keep the released row";
  waiter.join();
  ASSERT_TRUE(gb);
  const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(got - released);
  std::cout << "[ fair ] " << hooks().name << ": next waiter got the lock " << after.count()
            << " ms after a release kept by min_hold " << min_hold.count() << " ms (ticket TTL " << ticket_ttl.count()
            << " ms)\n";
  EXPECT_GE(got - before, min_hold) << "the lock was taken before min_hold ended";
  EXPECT_LT(after, min_hold + 1500ms) << "the next waiter waited for the releaser's ticket to expire";
  EXPECT_EQ(gb->fencing_token(), ga.fencing_token() + 1);
  EXPECT_TRUE(waiters(admin, name).empty()) << "tickets left behind";
  gb->release();
}
