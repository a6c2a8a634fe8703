// A TCP proxy between a test client and its database server that injects network faults on demand.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sqllock::test {

/// Listens on 127.0.0.1 (an ephemeral port unless one is given) and forwards every accepted TCP
/// connection to the upstream server, one I/O thread with poll(). Faults are switched at any time
/// from any thread:
///
/// - pass():      normal forwarding (the default); ends blackhole, hold and delay, disarms
///                lose_next_answer().
/// - blackhole(): a partition that drops bytes: whatever either side sends is read and discarded,
///                no RST, no FIN, connections stay open. A connection that lost bytes has a hole
///                in its stream and stays silent (both ways) after pass(), until its client closes
///                it or cut()/cut_silenced() resets it, as a half-open connection after a long
///                partition. Connections accepted meanwhile hear nothing and stay silent too.
/// - hold():      a short partition that TCP survives: bytes are kept, not delivered, and
///                delivered in order at pass() (late statements and late answers).
/// - lose_next_answer(): armed once: on the next connection that sends client->server bytes,
///                those bytes are forwarded and the server's answer is dropped; from then on that
///                connection is silent both ways (the statement ran, its client never hears). With
///                `reset_after`, the connection is reset (RST) once the answer was dropped instead.
/// - delay(d):    every chunk, both ways, is delivered d after it arrived (order kept).
/// - cut():       every open connection is reset (SO_LINGER 0: RST both ways).
///
/// Closing: when one side closes, the other is closed too (not during blackhole/hold, where the
/// close is delivered at pass()). The destructor resets everything and joins the thread.
class fault_proxy {
 public:
  /// Starts forwarding to upstream_host:upstream_port (resolved once, here). listen_port 0 picks
  /// an ephemeral port. Throws std::system_error when it cannot listen or resolve.
  fault_proxy(std::string upstream_host, int upstream_port, int listen_port = 0);
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  int port() const noexcept;
  /// `url` with its host[:port] replaced by 127.0.0.1:port() (postgresql://, postgres:// and
  /// mysql://; user, password, database and query are kept). Throws std::invalid_argument for
  /// any other URL.
  std::string wrap_url(const std::string& url) const;

  void pass();
  void blackhole();
  void hold();
  void lose_next_answer(bool reset_after = false);
  void delay(std::chrono::milliseconds d);
  void cut();
  /// Resets only the connections left silent by a blackhole or a lost answer (what TCP
  /// keepalive or a retransmission timeout would do to them eventually).
  void cut_silenced();

  /// Connections open now (accepted and not yet closed).
  std::size_t connections() const;
  /// Connections accepted since the start.
  std::uint64_t accepted() const;
  /// Answers dropped by lose_next_answer() (counted when the first byte of the answer is dropped).
  std::uint64_t answers_lost() const;
  /// Bytes dropped by blackhole() or a lost answer, both directions.
  std::uint64_t bytes_dropped() const;
  /// Connections reset by cut() or cut_silenced().
  std::uint64_t connections_cut() const;
  /// Connections whose upstream connect failed (server down): the client's socket was closed.
  std::uint64_t upstream_refused() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// `url` with host[:port] replaced by host:port, user-info, path and query kept. Throws
/// std::invalid_argument for a scheme other than postgresql://, postgres:// or mysql://.
std::string replace_url_host(const std::string& url, const std::string& host, int port);

}  // namespace sqllock::test
