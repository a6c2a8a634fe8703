// The notice queue: runs a client's lease notices (on_at_risk, on_lost and the renewed / at_risk /
// lost events) with no lock held, each lease's in the order the lease book decided them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace sqllock::detail {

/// What a notice tells about its lease. A lost notice makes the lease's pending at_risk and renewed
/// notices untrue: they are dropped. hold_lost: one hold of the lease passed its max_hold while
/// the others keep the lease; it stays true whatever follows and makes nothing untrue.
enum class notice_kind { renewed, at_risk, lost, hold_lost };

/// A callback the lease book decided under its lock, to run after it.
struct lease_notice {
  std::function<void(const std::string&, std::int64_t)> callback;
  std::string name;
  std::int64_t token = 0;
  std::uint64_t lease = 0;  ///< the acquisition's id in the book
  notice_kind kind = notice_kind::lost;
};

/// One per client, owned by its lease book through a shared_ptr; a thread running notices holds a
/// copy, so a callback may destroy the client (drop the last guard of a closed one) and the notices
/// behind it still run. The book pushes under its own lock, so that the queue's order is the order
/// of its decisions; this unit's mutex is a leaf, held only to push and pop, never while running
/// anything. The thread that pushed then calls deliver(). Per lease one notice runs at a time, in
/// order: a thread that finds one of the lease's notices running leaves the lease's next ones to the
/// thread running it, which runs them once its callback returns; any delivering thread runs the
/// others. Nobody waits for anybody: a callback may call back into the client (its notices of the same
/// lease then run after it returns) or block, without deadlock.
class notice_queue {
 public:
  /// Queue notices in the order given, behind everything pushed before.
  void push(std::vector<lease_notice>&& notices);
  /// Run pending notices of leases none of whose notices is running, until there are none. The
  /// caller holds a shared_ptr to the queue meanwhile.
  void deliver() noexcept;

 private:
  struct entry {
    lease_notice notice;
    bool dropped = false;  ///< untrue since: its lease was lost after it was decided
  };
  std::mutex mu_;
  std::deque<entry> pending_;
  std::vector<std::uint64_t> running_;  ///< leases one of whose notices a thread is running
};

}  // namespace sqllock::detail
