// The event sink: builds lease_event values and hands them to client_options::on_event, safely.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sqllock/client.hpp"
#include "sqllock/error.hpp"

namespace sqllock::detail {

/// The optional fields of an event (see sqllock::lease_event).
struct event_fields {
  std::chrono::milliseconds waited{0};
  std::chrono::milliseconds held{0};
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds time_left{0};
  std::string_view statement{};
  std::string_view code{};
  std::string_view reason{};
};

/// One per client, shared (later() callbacks keep it alive, so they may run after the client is
/// gone: a hook that drops the last guard of a closed client). emit() must be called with no lock
/// of sqllock held (the hook may call back into the client); the lease book, which finds events
/// under its lock, queues later() callbacks instead (notice_queue). Every caller checks enabled()
/// first, so that a client without a hook builds nothing.
class event_sink : public std::enable_shared_from_this<event_sink> {
 public:
  event_sink(const client_options& options, std::string_view backend, std::string holder)
      : on_event_(options.on_event), log_(options.log), backend_(backend), holder_(std::move(holder)) {}

  bool enabled() const noexcept { return static_cast<bool>(on_event_); }

  /// Report one event of the lease row `row_name` (a permit row is reported as its semaphore and
  /// slot). A hook that throws is logged (warning) and otherwise ignored.
  void emit(event_kind kind, std::string_view row_name, std::int64_t token, const event_fields& f = {}) const noexcept;
  /// A lease statement failed with `e` (statement_error).
  void emit_error(const sqllock::error& e, std::string_view row_name, std::int64_t token = 0) const noexcept;
  /// An event to report later (a lease_notice callback run after the caller's lock is released);
  /// `f` must not view anything (its statement and code are ignored), `reason` is copied.
  std::function<void(const std::string&, std::int64_t)> later(event_kind kind, event_fields f,
                                                                 std::string reason = {}) const;

 private:
  event_callback on_event_;
  log_callback log_;
  std::string backend_;
  std::string holder_;
};

}  // namespace sqllock::detail
