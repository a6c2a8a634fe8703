// Conformance: the multi-lock (all or nothing, sorted order, one deadline) and leader election
// (one leader at a time, increasing terms, loss reported) built on the lease engine (issue 16).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "conformance/fixture.hpp"
#include "core/lease_book.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
std::vector<std::string> names_of(const std::string& tag, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(unique_name(tag + std::to_string(i)));
  return out;
}
}  // namespace

// ---- multi-lock ----

TEST(MultiLock, AcquiresEveryNameOnceInSortedOrderAndReleasesThemAll) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_all", 3);
  auto g = sqllock::acquire_all(a, {n[2], n[0], n[1], n[0]}, 5s);
  ASSERT_TRUE(g);
  auto sorted = n;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(g.names(), sorted);
  ASSERT_EQ(g.fencing_tokens().size(), 3u);
  for (const auto& name : n) {
    auto info = b.inspect(name);
    ASSERT_TRUE(info) << name;
    EXPECT_EQ(info->holder, a.holder_id());
    EXPECT_EQ(info->fencing_token, g.lease(name).fencing_token());
    EXPECT_FALSE(b.try_acquire(name));
  }
  g.release();
  EXPECT_FALSE(g.owns());
  for (const auto& name : n) EXPECT_FALSE(b.inspect(name)) << name << " still held after release";
  g.release();  // finished: a no-op
}

// A lease taken early and lost while a later name was waited for (here: taken over after a
// force-release, so its renewal fails the owner check) is not handed back as part of the set.
TEST(MultiLock, ANameLostWhileWaitingForTheOthersIsNeverReturned) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_lostwait", 2);
  std::sort(n.begin(), n.end());
  auto blocker = b.try_acquire(n[1], {.ttl = 30s});
  ASSERT_TRUE(blocker);
  std::atomic<bool> returned_lost{false}, threw_timeout{false}, loss_seen{false};
  std::thread waiter([&] {
    try {
      auto g = sqllock::acquire_all(
          a, n, 3s, {.ttl = 600ms, .on_lost = [&](const std::string&, std::int64_t) { loss_seen = true; }});
      returned_lost = g.lost() || !b.inspect(n[0]) || b.inspect(n[0])->holder != a.holder_id();
    } catch (const sqllock::acquire_timeout&) {
      threw_timeout = true;
    }
  });
  ASSERT_TRUE(eventually(
      [&] {
        auto i = b.inspect(n[0]);
        return i && i->holder == a.holder_id();
      },
      3s));
  ASSERT_TRUE(b.force_release(n[0]));
  auto thief = b.try_acquire(n[0], {.ttl = 30s});
  ASSERT_TRUE(thief);
  // a's watchdog renews at ~200 ms and finds the lease gone (a force-release is learnt of there).
  ASSERT_TRUE(eventually([&] { return loss_seen.load(); }, 5s)) << "the takeover was never noticed";
  blocker->release();  // now the second name is free: the set must not be returned
  waiter.join();
  EXPECT_FALSE(returned_lost) << "acquire_all returned a set whose first lease was taken over";
  EXPECT_TRUE(threw_timeout);
  auto info = b.inspect(n[1]);
  EXPECT_TRUE(!info || info->holder != a.holder_id()) << "the second name was left held";
}

// The client's deadline thread reports a loss (lost()) at the lease's loss point only when it runs
// in time. Here it is held up (deadline_stall, as a descheduled thread would be) while the set's
// first lease, not renewed, passes its loss point waiting for the second name: acquire_all must
// apply the engine's own rule (a lease past its loss point is lost: lease_guard::usable) and take
// the set afresh, not return a lease another client may take over at any moment with lost() still
// false (it did, 121 ms past the loss point).
TEST(MultiLock, ALeasePastItsLossPointIsNeverReturnedWhenTheDeadlineThreadIsLate) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_late", 2);
  std::sort(n.begin(), n.end());
  auto blocker = b.try_acquire(n[1], {.ttl = 30s});
  ASSERT_TRUE(blocker);
  deadline_stall stall(a);
  ASSERT_TRUE(stall.holding()) << "the deadline thread was never held up";
  std::jthread freer([&] {
    std::this_thread::sleep_for(400ms);  // past the first lease's loss point (282 ms)
    blocker->release();
  });
  const sqllock::lease_options opts{.ttl = 300ms, .auto_renew = false};
  auto g = sqllock::acquire_all(a, n, 5s, opts);
  const auto returned = clock::now();
  for (const auto& name : n) {
    const auto& lease = g.lease(name);
    const auto loss_point = lease.valid_until() - sqllock::detail::loss_margin(opts.ttl);
    EXPECT_TRUE(returned < loss_point)
        << "acquire_all returned the lease of " << name << " "
        << std::chrono::duration_cast<std::chrono::milliseconds>(returned - loss_point).count()
        << " ms past its loss point, lost() == " << lease.lost();
  }
  EXPECT_TRUE(g.usable());
  g.release();
  EXPECT_FALSE(g.usable()) << "a released set is not usable";
}

// renew() renews every lease of the set (`sqllock run` relies on it for a fair lock taken at its
// ticket's short TTL), and a lease that fails its owner check does not keep the others from being
// renewed: the first error is thrown after all were tried.
TEST(MultiLock, RenewExtendsEveryLeaseAndThrowsTheFirstErrorAfterTryingAll) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_renew", 2);
  std::sort(n.begin(), n.end());
  const sqllock::lease_options opts{.ttl = 3s, .auto_renew = false};
  auto g = sqllock::acquire_all(a, n, 5s, opts);
  ASSERT_TRUE(g);
  const auto before0 = g[0].valid_until();
  const auto before1 = g[1].valid_until();
  std::this_thread::sleep_for(200ms);
  g.renew();
  EXPECT_GE(g[0].valid_until() - before0, 150ms) << "the first lease was not renewed";
  EXPECT_GE(g[1].valid_until() - before1, 150ms) << "the second lease was not renewed";
  // The first name is released by force: its renewal fails, the second is still renewed.
  ASSERT_TRUE(b.force_release(n[0]));
  const auto kept = g[1].valid_until();
  std::this_thread::sleep_for(200ms);
  EXPECT_THROW(g.renew(), sqllock::lease_lost);
  EXPECT_GE(g[1].valid_until() - kept, 150ms) << "a failed renewal kept the next lease from being renewed";
  EXPECT_TRUE(g[0].lost());
  EXPECT_FALSE(g[1].lost());
  auto info = b.inspect(n[1]);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->fencing_token, g[1].fencing_token());
  EXPECT_THROW(g.release(), sqllock::lease_lost);  // the lost one; the other is freed
  EXPECT_FALSE(b.inspect(n[1]));
}

TEST(MultiLock, OneNameHeldElsewhereLeavesNothingHeld) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_none", 4);
  std::sort(n.begin(), n.end());
  auto blocker = b.try_acquire(n[2]);  // the third in sorted order: two are taken before it fails
  ASSERT_TRUE(blocker);
  const auto start = clock::now();
  EXPECT_THROW(sqllock::acquire_all(a, n, 300ms), sqllock::acquire_timeout);
  EXPECT_LT(ms_since(start), 300 + 1000);
  for (const auto& name : n) {
    auto info = b.inspect(name);
    if (name == n[2]) {
      ASSERT_TRUE(info);
      EXPECT_EQ(info->holder, b.holder_id());
    } else {
      EXPECT_FALSE(info) << name << " was left held by a failed multi-lock";
    }
  }
  EXPECT_FALSE(sqllock::try_acquire_all(a, n, 0ms));
  for (const auto& name : n) {
    if (name != n[2]) EXPECT_FALSE(b.inspect(name)) << name << " was left held by a failed try";
  }
  blocker->release();
  auto g = sqllock::try_acquire_all(a, n, 2s);
  EXPECT_TRUE(g);
}

TEST(MultiLock, CancellationRollsBackWhatWasTaken) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_cancel", 3);
  std::sort(n.begin(), n.end());
  auto blocker = b.try_acquire(n[1]);
  ASSERT_TRUE(blocker);
  std::stop_source stop;
  std::jthread canceller([&] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  const auto start = clock::now();
  EXPECT_THROW(sqllock::acquire_all(a, n, 30s, {}, stop.get_token()), sqllock::cancelled);
  EXPECT_LT(ms_since(start), 3000);
  EXPECT_FALSE(b.inspect(n[0])) << "the name taken before the cancellation is still held";
  EXPECT_FALSE(b.inspect(n[2]));
}

TEST(MultiLock, TheWholeSetSharesOneDeadline) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_deadline", 3);
  std::sort(n.begin(), n.end());
  // Each name frees up 250 ms after the previous one: a per-name timeout of 400 ms would acquire
  // the set after about 750 ms, one deadline of 400 ms for the set must give up.
  std::vector<sqllock::lease_guard> held;
  for (const auto& name : n) {
    auto g = b.try_acquire(name);
    ASSERT_TRUE(g);
    held.push_back(std::move(*g));
  }
  std::jthread freer([&] {
    for (auto& g : held) {
      std::this_thread::sleep_for(250ms);
      g.release();
    }
  });
  const auto start = clock::now();
  EXPECT_FALSE(sqllock::try_acquire_all(a, n, 400ms));
  const auto took = ms_since(start);
  EXPECT_GE(took, 390);
  EXPECT_LT(took, 400 + 600) << "the set took longer than its one deadline";
}

TEST(MultiLock, OppositeOrdersNeverDeadlock) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_order", 4);
  auto reversed = n;
  std::reverse(reversed.begin(), reversed.end());
  constexpr int rounds = 40;
  std::atomic<int> done{0};
  std::atomic<int> failures{0};
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  auto worker = [&](sqllock::client& c, const std::vector<std::string>& set) {
    for (int i = 0; i < rounds; ++i) {
      try {
        auto g = sqllock::acquire_all(c, set, 5s, {.ttl = 10s});  // a deadlock would time out
        if (inside.fetch_add(1) != 0) overlap = true;
        std::this_thread::sleep_for(1ms);
        inside.fetch_sub(1);
        g.release();
        ++done;
      } catch (const std::exception&) {
        ++failures;
      }
    }
  };
  const auto start = clock::now();
  {
    std::jthread t1([&] { worker(a, n); });
    std::jthread t2([&] { worker(b, reversed); });
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(done.load(), 2 * rounds);
  EXPECT_FALSE(overlap.load()) << "two multi-locks on the same set held it at once";
  EXPECT_LT(ms_since(start), 60000);
}

TEST(MultiLock, BadInputIsATypedErrorThatAcquiresNothing) {
  auto a = make_client();
  auto b = make_client();
  auto good = unique_name("multi_bad");
  EXPECT_THROW(sqllock::acquire_all(a, {}, 1s), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::acquire_all(a, {good, ""}, 1s), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::acquire_all(a, {good, std::string(256, 'x')}, 1s), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::acquire_all(a, {good, std::string("a\0b", 3)}, 1s), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::acquire_all(a, {good}, -1ms), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::try_acquire_all(a, {}, 1s), sqllock::invalid_argument);
  EXPECT_FALSE(b.inspect(good)) << "bad input acquired a name";
}

TEST(MultiLock, AnAlreadyStoppedTokenAcquiresNothing) {
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_stopped", 2);
  std::stop_source stop;
  stop.request_stop();
  EXPECT_THROW(sqllock::acquire_all(a, n, 1s, {}, stop.get_token()), sqllock::cancelled);
  for (const auto& name : n) EXPECT_FALSE(b.inspect(name));
}

TEST(MultiLock, TheGuardIsMoveOnlyAndReleasesInItsDestructor) {
  static_assert(!std::is_copy_constructible_v<sqllock::multi_lease_guard>);
  static_assert(std::is_nothrow_move_constructible_v<sqllock::multi_lease_guard>);
  auto a = make_client();
  auto b = make_client();
  auto n = names_of("multi_move", 2);
  {
    auto g = sqllock::acquire_all(a, n, 2s);
    sqllock::multi_lease_guard moved = std::move(g);
    EXPECT_FALSE(g.owns());
    EXPECT_TRUE(moved.owns());
    for (const auto& name : n) EXPECT_TRUE(b.inspect(name));
  }
  for (const auto& name : n) EXPECT_FALSE(b.inspect(name)) << name << " outlived its guard";
}

// ---- leader election ----

TEST(Leader, AwaitLeadershipIsExclusiveWithIncreasingTerms) {
  constexpr int participants = 4;
  constexpr int terms_each = 8;
  const auto election = unique_name("elect_block");
  std::vector<sqllock::client> clients;
  for (int i = 0; i < participants; ++i) clients.push_back(make_client());
  std::mutex m;
  std::vector<std::int64_t> tokens;
  std::atomic<int> leaders{0};
  std::atomic<int> max_leaders{0};
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < participants; ++i) {
      threads.emplace_back([&, i] {
        for (int k = 0; k < terms_each; ++k) {
          try {
            auto g = sqllock::await_leadership(clients[i], election, 30s, {.ttl = 10s});
            const int now = leaders.fetch_add(1) + 1;
            int seen = max_leaders.load();
            while (now > seen && !max_leaders.compare_exchange_weak(seen, now)) {
            }
            {
              std::lock_guard lk(m);
              tokens.push_back(g.fencing_token());
            }
            auto who = sqllock::current_leader(clients[(i + 1) % participants], election);
            if (!who || who->holder != clients[i].holder_id() || who->fencing_token != g.fencing_token()) ++failures;
            std::this_thread::sleep_for(2ms);
            leaders.fetch_sub(1);
            g.release();
          } catch (const std::exception&) {
            ++failures;
          }
        }
      });
    }
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_leaders.load(), 1) << "two participants led at once";
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(participants * terms_each));
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]) << "term " << i;
  auto c = make_client();
  EXPECT_FALSE(sqllock::current_leader(c, election));
}

TEST(Leader, LatchesElectOneLeaderAtATimeAndHandOverOnClose) {
  constexpr int participants = 3;
  constexpr int rounds = 6;
  const auto election = unique_name("elect_latch");
  std::vector<sqllock::client> clients;
  for (int i = 0; i < participants + rounds; ++i) clients.push_back(make_client());
  std::mutex m;
  std::vector<std::int64_t> elected;
  std::atomic<int> leaders{0};
  std::atomic<bool> overlap{false};
  std::atomic<int> revoked_closed{0};
  auto options = [&] {
    sqllock::leader_latch_options o;
    o.lease.ttl = 5s;
    o.on_elected = [&](std::int64_t token) {
      if (leaders.fetch_add(1) != 0) overlap = true;
      std::lock_guard lk(m);
      elected.push_back(token);
    };
    o.on_revoked = [&](std::int64_t, sqllock::leadership_end why) {
      leaders.fetch_sub(1);
      if (why == sqllock::leadership_end::closed) ++revoked_closed;
    };
    return o;
  };
  std::vector<std::unique_ptr<sqllock::leader_latch>> latches;
  int next_client = 0;
  for (int i = 0; i < participants; ++i) {
    latches.push_back(std::make_unique<sqllock::leader_latch>(clients[next_client++], election, options()));
  }
  for (int r = 0; r < rounds; ++r) {
    ASSERT_TRUE(eventually(
        [&] { return std::any_of(latches.begin(), latches.end(), [](auto& l) { return l->is_leader(); }); }, 10s))
        << "no leader in round " << r;
    int count = 0;
    std::size_t leader = 0;
    for (std::size_t i = 0; i < latches.size(); ++i) {
      if (latches[i]->is_leader()) {
        ++count;
        leader = i;
      }
    }
    EXPECT_EQ(count, 1);
    const auto token = latches[leader]->fencing_token();
    auto who = sqllock::current_leader(clients[next_client], election);
    ASSERT_TRUE(who);
    EXPECT_EQ(who->fencing_token, token);
    latches[leader]->close();
    EXPECT_FALSE(latches[leader]->is_leader());
    latches[leader] = std::make_unique<sqllock::leader_latch>(clients[next_client++], election, options());
  }
  latches.clear();
  EXPECT_FALSE(overlap.load()) << "on_elected ran while another participant led";
  EXPECT_EQ(leaders.load(), 0);
  EXPECT_EQ(revoked_closed.load(), static_cast<int>(elected.size()));
  ASSERT_GE(elected.size(), static_cast<std::size_t>(rounds));
  for (std::size_t i = 1; i < elected.size(); ++i) EXPECT_LT(elected[i - 1], elected[i]);
}

TEST(Leader, ALostLeaseIsReportedToTheLatchInTime) {
  auto a = make_client();
  auto admin = make_client();
  const auto election = unique_name("elect_lost");
  std::atomic<int> elections{0};
  std::atomic<int> lost{0};
  std::atomic<clock::rep> lost_at{0};
  std::atomic<std::int64_t> lost_token{0};
  sqllock::leader_latch_options o;
  o.lease.ttl = 1500ms;
  o.on_elected = [&](std::int64_t) { ++elections; };
  o.on_revoked = [&](std::int64_t token, sqllock::leadership_end why) {
    if (why != sqllock::leadership_end::lost) return;
    lost_token = token;
    lost_at = clock::now().time_since_epoch().count();
    ++lost;
  };
  sqllock::leader_latch latch(a, election, o);
  ASSERT_TRUE(latch.await_leadership(10s));
  const auto token = latch.fencing_token();
  EXPECT_GT(token, 0);
  const auto forced = clock::now();
  ASSERT_TRUE(admin.force_release(election));
  ASSERT_TRUE(eventually([&] { return lost.load() > 0; }, 3s)) << "the leader was not told of its loss";
  EXPECT_EQ(lost_token.load(), token);
  EXPECT_LE(clock::time_point(clock::duration(lost_at.load())) - forced, 1500ms)
      << "loss reported later than a TTL after the lease was gone";
  // The latch takes part again and is elected for a new, later term.
  ASSERT_TRUE(eventually([&] { return latch.is_leader() && latch.fencing_token() > token; }, 10s));
  EXPECT_EQ(elections.load(), 2);
}

// Callbacks that throw never leave the latch believing it leads, nor crash its thread.
TEST(Leader, ThrowingCallbacksNeverKeepAStaleLeader) {
  auto a = make_client();
  auto admin = make_client();
  const auto election = unique_name("elect_throw");
  std::atomic<int> revoked_lost{0};
  sqllock::leader_latch_options o;
  o.lease.ttl = 1500ms;
  o.lease.on_lost = [](const std::string&, std::int64_t) { throw std::runtime_error("user on_lost throws"); };
  o.on_elected = [](std::int64_t) { throw std::runtime_error("user on_elected throws"); };
  o.on_revoked = [&](std::int64_t, sqllock::leadership_end why) {
    if (why == sqllock::leadership_end::lost) ++revoked_lost;
    throw std::runtime_error("user on_revoked throws");
  };
  sqllock::leader_latch latch(a, election, o);
  ASSERT_TRUE(latch.await_leadership(10s));
  const auto token = latch.fencing_token();
  ASSERT_TRUE(admin.force_release(election));
  auto thief = admin.try_acquire(election, {.ttl = 30s});
  ASSERT_TRUE(thief);
  EXPECT_TRUE(eventually([&] { return !latch.is_leader(); }, 3s)) << "the latch still believes it leads";
  // is_leader() turns false (the lease not usable, then `leading` cleared) before on_revoked runs
  // on the client's thread: wait for the call itself, then check it came once.
  EXPECT_TRUE(eventually([&] { return revoked_lost.load() > 0; }, 3s)) << "on_revoked was never called for the loss";
  EXPECT_EQ(revoked_lost.load(), 1);
  // It takes part again and leads once the other lets go.
  thief->release();
  EXPECT_TRUE(eventually([&] { return latch.is_leader() && latch.fencing_token() > token; }, 10s));
}

TEST(Leader, TheBlockingLeaderIsToldOfItsLoss) {
  auto a = make_client();
  auto b = make_client();
  const auto election = unique_name("elect_block_lost");
  std::atomic<int> lost{0};
  auto g = sqllock::await_leadership(a, election, 5s,
                                     {.ttl = 1500ms, .on_lost = [&](const std::string&, std::int64_t) { ++lost; }});
  ASSERT_TRUE(b.force_release(election));
  ASSERT_TRUE(eventually([&] { return lost.load() == 1; }, 3s));
  EXPECT_TRUE(g.lost());
  auto next = sqllock::await_leadership(b, election, 5s);
  EXPECT_GT(next.fencing_token(), g.fencing_token());
  auto who = sqllock::current_leader(a, election);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->holder, b.holder_id());
}

TEST(Leader, AClosedLatchLetsAnotherLeadAndItsDestructorJoins) {
  auto a = make_client();
  auto b = make_client();
  const auto election = unique_name("elect_close");
  auto first = std::make_unique<sqllock::leader_latch>(a, election, sqllock::leader_latch_options{});
  ASSERT_TRUE(first->await_leadership(10s));
  sqllock::leader_latch second(b, election);
  EXPECT_FALSE(second.await_leadership(300ms));
  first.reset();  // destructor: steps down, releases, joins
  EXPECT_TRUE(second.await_leadership(10s));
  EXPECT_THROW(sqllock::leader_latch(a, "", {}), sqllock::invalid_argument);
}
