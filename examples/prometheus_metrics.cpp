// Example: lease events as Prometheus metrics, served in text format from a tiny HTTP endpoint.
//   example_prometheus_metrics [URL [PORT [SECONDS]]]
//     URL      default sqlite:sqllock.db (run `sqllock migrate` first)
//     PORT     on 127.0.0.1; 0 (default) picks a free one; the program prints "listening on ..."
//     SECONDS  how long to run its demo workload (default 30)
// Then: curl http://127.0.0.1:PORT/metrics
//
// The hook only updates counters under a mutex of its own (it runs on sqllock's threads: keep it
// short); the HTTP thread formats them. Plain POSIX sockets, one request per connection.
#include <sqllock/sqllock.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

/// A Prometheus histogram with fixed buckets (seconds).
struct histogram {
  static constexpr std::array<double, 9> bounds{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30};
  std::array<std::uint64_t, bounds.size()> counts{};  // cumulative when written
  double sum = 0;
  std::uint64_t count = 0;
  void observe(std::chrono::milliseconds d) {
    const double s = static_cast<double>(d.count()) / 1000.0;
    for (std::size_t i = 0; i < bounds.size(); ++i)
      if (s <= bounds[i]) ++counts[i];
    sum += s;
    ++count;
  }
  void write(std::ostream& out, const std::string& metric, const std::string& help) const {
    out << "# HELP " << metric << " " << help << "\n# TYPE " << metric << " histogram\n";
    for (std::size_t i = 0; i < bounds.size(); ++i) out << metric << "_bucket{le=\"" << bounds[i] << "\"} " << counts[i] << "\n";
    out << metric << "_bucket{le=\"+Inf\"} " << count << "\n";
    out << metric << "_sum " << sum << "\n" << metric << "_count " << count << "\n";
  }
};

/// What the hook records.
class lease_metrics {
 public:
  void record(const sqllock::lease_event& e) {
    std::lock_guard lk(mu_);
    backend_ = std::string(e.backend);
    ++events_[std::string(sqllock::to_string(e.kind))];
    switch (e.kind) {
      case sqllock::event_kind::acquired:
        wait_.observe(e.waited);
        ++held_;
        break;
      case sqllock::event_kind::released:
        hold_.observe(e.held);
        --held_;
        break;
      case sqllock::event_kind::lost:
        hold_.observe(e.held);
        --held_;
        break;
      default:
        break;
    }
  }
  std::string exposition() const {
    std::lock_guard lk(mu_);
    std::ostringstream out;
    out << "# HELP sqllock_events_total Lease events by kind.\n# TYPE sqllock_events_total counter\n";
    for (const char* kind : {"acquired", "renewed", "at_risk", "lost", "released", "statement_error"}) {
      const auto it = events_.find(kind);
      out << "sqllock_events_total{backend=\"" << backend_ << "\",kind=\"" << kind << "\"} "
          << (it == events_.end() ? 0 : it->second) << "\n";
    }
    out << "# HELP sqllock_leases_held Leases this process holds now.\n# TYPE sqllock_leases_held gauge\n";
    out << "sqllock_leases_held " << held_ << "\n";
    wait_.write(out, "sqllock_acquire_wait_seconds", "Time from an acquire call to the acquisition.");
    hold_.write(out, "sqllock_hold_seconds", "Time from an acquisition to its release or loss.");
    return out.str();
  }

 private:
  mutable std::mutex mu_;
  std::string backend_;
  std::map<std::string, std::uint64_t> events_;
  long held_ = 0;
  histogram wait_, hold_;
};

/// Serves GET /metrics on 127.0.0.1 until `stop`; returns the bound port through `port`.
class metrics_server {
 public:
  metrics_server(const lease_metrics& m, unsigned short port) : metrics_(m) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0) {
      ::close(fd_);
      throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port));
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~metrics_server() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  unsigned short port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      answer(c);
      ::close(c);
    }
  }
  void answer(int c) {
    std::string request;
    char buf[1024];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) return;
      const auto n = ::read(c, buf, sizeof buf);
      if (n <= 0) return;
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
    if (request.starts_with("GET /metrics ") || request.starts_with("GET /metrics?")) {
      body = metrics_.exposition();
    } else {
      status = "404 Not Found";
      type = "text/plain; charset=utf-8";
      body = "try /metrics\n";
    }
    const std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                                 "\r\nContent-Length: " + std::to_string(body.size()) +
                                 "\r\nConnection: close\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < response.size()) {
      const auto n = ::send(c, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  const lease_metrics& metrics_;
  int fd_ = -1;
  unsigned short port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "sqlite:sqllock.db";
  const int port = argc > 2 ? std::stoi(argv[2]) : 0;
  const int seconds = argc > 3 ? std::stoi(argv[3]) : 30;
  try {
    lease_metrics metrics;
    sqllock::client_options options;
    options.on_event = [&metrics](const sqllock::lease_event& e) { metrics.record(e); };
    auto client = sqllock::connect(url, options);
    metrics_server server(metrics, static_cast<unsigned short>(port));
    std::cout << "listening on 127.0.0.1:" << server.port() << std::endl;

    // A demo workload: take a lock briefly, again and again, with a short TTL so renewals happen.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (auto lease = client.try_acquire_for("metrics-demo", 1s, {.ttl = 300ms})) {
        std::this_thread::sleep_for(150ms);
        lease->release();
      }
      std::this_thread::sleep_for(50ms);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
