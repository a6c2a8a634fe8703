// A TCP proxy between a test client and its database server that injects network faults on demand.
#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

namespace sqllock::test {

namespace {

using clock = std::chrono::steady_clock;

enum class mode { pass, blackhole, hold };

// Above this many queued bytes in one direction, the proxy stops reading from the sender.
constexpr std::size_t max_queued = 4 << 20;

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

void close_fd(int& fd, bool reset) {
  if (fd < 0) return;
  if (reset) {
    linger l{1, 0};  // close() now sends RST instead of FIN
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  ::close(fd);
  fd = -1;
}

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct chunk {
  std::string data;
  clock::time_point due;
};

// One direction of a connection: bytes read from `from`, queued, written to the other side.
struct pipe_dir {
  std::deque<chunk> queue;
  std::size_t queued = 0;
  std::size_t written = 0;  // of queue.front()
  bool eof = false;         // the sender closed (or failed); acted on once the queue is drained
  bool error = false;       // the sender failed with a reset: propagate a reset
};

struct connection {
  int client = -1;
  int server = -1;
  pipe_dir to_server;          // client -> server
  pipe_dir to_client;          // server -> client
  bool silent = false;         // dropping everything both ways (lost bytes or a lost answer)
  bool losing_answer = false;  // forwarded the armed request; the next server bytes are dropped
  bool reset_after_loss = false;
  bool done = false;
};

}  // namespace

struct fault_proxy::impl {
  sockaddr_storage upstream{};
  socklen_t upstream_len = 0;
  int listener = -1;
  int port = 0;
  int wake[2] = {-1, -1};

  // Controls, under `m`; the I/O thread applies them and reports the generation it applied.
  mutable std::mutex m;
  std::condition_variable applied_cv;
  mode want_mode = mode::pass;
  std::chrono::milliseconds want_delay{0};
  bool lose_armed = false;
  bool lose_reset = false;
  std::uint64_t cut_requests = 0;
  std::uint64_t cut_silenced_requests = 0;
  std::uint64_t generation = 0;
  std::uint64_t applied = 0;
  bool stopping = false;

  std::atomic<std::size_t> open{0};
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> answers_lost{0};
  std::atomic<std::uint64_t> bytes_dropped{0};
  std::atomic<std::uint64_t> cut_count{0};
  std::atomic<std::uint64_t> refused{0};

  // Owned by the I/O thread only.
  std::list<connection> conns;
  mode cur_mode = mode::pass;
  std::chrono::milliseconds cur_delay{0};
  std::uint64_t cuts_done = 0;
  std::uint64_t cut_silenced_done = 0;

  std::thread io;

  // Changes the controls, wakes the I/O thread and waits until it applied them.
  template <class F>
  void control(F change) {
    std::unique_lock lk(m);
    change();
    const auto gen = ++generation;
    char b = 1;
    [[maybe_unused]] auto n = ::write(wake[1], &b, 1);
    applied_cv.wait(lk, [&] { return applied >= gen || stopping; });
  }

  void run();
  void accept_all();
  void apply_controls();
  void read_side(connection& c, bool from_client);
  void write_side(connection& c, bool to_client_side, clock::time_point now);
  void drop(connection& c, std::size_t n) {
    bytes_dropped += n;
    c.silent = true;
  }
  void finish(connection& c, bool reset) {
    close_fd(c.client, reset);
    close_fd(c.server, reset);
    if (!c.done) --open;
    c.done = true;
  }
};

fault_proxy::fault_proxy(std::string upstream_host, int upstream_port, int listen_port)
    : impl_(std::make_unique<impl>()) {
  auto& s = *impl_;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const auto service = std::to_string(upstream_port);
  if (int rc = ::getaddrinfo(upstream_host.c_str(), service.c_str(), &hints, &res); rc != 0 || !res) {
    throw std::system_error(EINVAL, std::generic_category(),
                            "fault_proxy: cannot resolve " + upstream_host + ": " + ::gai_strerror(rc));
  }
  std::memcpy(&s.upstream, res->ai_addr, res->ai_addrlen);
  s.upstream_len = res->ai_addrlen;
  ::freeaddrinfo(res);

  s.listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listener < 0) throw_errno("fault_proxy: socket");
  int one = 1;
  ::setsockopt(s.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(listen_port));
  if (::bind(s.listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s.listener, 128) != 0) {
    const int e = errno;
    ::close(s.listener);
    throw std::system_error(e, std::generic_category(), "fault_proxy: listen on 127.0.0.1");
  }
  socklen_t len = sizeof a;
  ::getsockname(s.listener, reinterpret_cast<sockaddr*>(&a), &len);
  s.port = ntohs(a.sin_port);
  if (::pipe2(s.wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    ::close(s.listener);
    throw_errno("fault_proxy: pipe");
  }
  s.io = std::thread([&s] { s.run(); });
}

fault_proxy::~fault_proxy() {
  {
    std::lock_guard lk(impl_->m);
    impl_->stopping = true;
  }
  char b = 1;
  [[maybe_unused]] auto n = ::write(impl_->wake[1], &b, 1);
  impl_->io.join();
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
  ::close(impl_->listener);
}

int fault_proxy::port() const noexcept { return impl_->port; }

std::string fault_proxy::wrap_url(const std::string& url) const { return replace_url_host(url, "127.0.0.1", port()); }

void fault_proxy::pass() {
  impl_->control([&] {
    impl_->want_mode = mode::pass;
    impl_->want_delay = std::chrono::milliseconds(0);
    impl_->lose_armed = false;
  });
}

void fault_proxy::blackhole() {
  impl_->control([&] { impl_->want_mode = mode::blackhole; });
}

void fault_proxy::hold() {
  impl_->control([&] { impl_->want_mode = mode::hold; });
}

void fault_proxy::lose_next_answer(bool reset_after) {
  impl_->control([&] {
    impl_->lose_armed = true;
    impl_->lose_reset = reset_after;
  });
}

void fault_proxy::delay(std::chrono::milliseconds d) {
  impl_->control([&] {
    impl_->want_mode = mode::pass;
    impl_->want_delay = d;
  });
}

void fault_proxy::cut() {
  impl_->control([&] { ++impl_->cut_requests; });
}

void fault_proxy::cut_silenced() {
  impl_->control([&] { ++impl_->cut_silenced_requests; });
}

std::size_t fault_proxy::connections() const { return impl_->open.load(); }
std::uint64_t fault_proxy::accepted() const { return impl_->accepted.load(); }
std::uint64_t fault_proxy::answers_lost() const { return impl_->answers_lost.load(); }
std::uint64_t fault_proxy::bytes_dropped() const { return impl_->bytes_dropped.load(); }
std::uint64_t fault_proxy::connections_cut() const { return impl_->cut_count.load(); }
std::uint64_t fault_proxy::upstream_refused() const { return impl_->refused.load(); }

// ------------------------------------------------------------------------ the I/O thread

void fault_proxy::impl::apply_controls() {
  std::uint64_t gen;
  std::uint64_t cuts;
  std::uint64_t cut_silenced;
  {
    std::lock_guard lk(m);
    cur_mode = want_mode;
    cur_delay = want_delay;
    gen = generation;
    cuts = cut_requests;
    cut_silenced = cut_silenced_requests;
  }
  if (cur_mode == mode::blackhole) {
    // Bytes in flight (delayed) are lost with the partition.
    for (auto& c : conns) {
      for (auto* d : {&c.to_server, &c.to_client}) {
        if (d->queued > 0) {
          drop(c, d->queued);
          d->queue.clear();
          d->queued = 0;
          d->written = 0;
        }
      }
    }
  }
  if (cuts != cuts_done) {
    cuts_done = cuts;
    for (auto& c : conns) {
      if (!c.done) {
        finish(c, true);
        ++cut_count;
      }
    }
  }
  if (cut_silenced != cut_silenced_done) {
    cut_silenced_done = cut_silenced;
    for (auto& c : conns) {
      if (!c.done && c.silent) {
        finish(c, true);
        ++cut_count;
      }
    }
  }
  std::lock_guard lk(m);
  applied = gen;
  applied_cv.notify_all();
}

void fault_proxy::impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    ++accepted;
    tune(fd);
    connection c;
    c.client = fd;
    if (cur_mode == mode::blackhole) {
      c.silent = true;  // a partition: the client hears nothing, the server never sees it
    } else {
      int s = ::socket(upstream.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      timeval tv{2, 0};  // connect() honours the send timeout
      ::setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&upstream), upstream_len) != 0) {
        if (s >= 0) ::close(s);
        ++refused;
        close_fd(fd, true);  // as the server's refusal would: the client sees a reset
        continue;
      }
      tune(s);
      c.server = s;
    }
    conns.push_back(std::move(c));
    ++open;
  }
}

void fault_proxy::impl::read_side(connection& c, bool from_client) {
  int fd = from_client ? c.client : c.server;
  auto& dir = from_client ? c.to_server : c.to_client;
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    dir.eof = true;
    dir.error = n < 0;
    return;
  }
  const auto len = static_cast<std::size_t>(n);
  if (cur_mode == mode::blackhole || c.silent) {
    drop(c, len);
    return;
  }
  if (from_client && !c.losing_answer) {
    std::lock_guard lk(m);
    if (lose_armed) {
      lose_armed = false;
      c.losing_answer = true;
      c.reset_after_loss = lose_reset;
    }
  }
  if (!from_client && c.losing_answer) {
    ++answers_lost;
    c.losing_answer = false;
    drop(c, len);
    c.to_client.queue.clear();
    c.to_client.queued = 0;
    c.to_client.written = 0;
    if (c.reset_after_loss) finish(c, true);
    return;
  }
  dir.queue.push_back({std::string(buf, len), clock::now() + cur_delay});
  dir.queued += len;
}

void fault_proxy::impl::write_side(connection& c, bool to_client_side, clock::time_point now) {
  int fd = to_client_side ? c.client : c.server;
  auto& dir = to_client_side ? c.to_client : c.to_server;
  while (!dir.queue.empty() && dir.queue.front().due <= now) {
    auto& f = dir.queue.front();
    ssize_t n = ::send(fd, f.data.data() + dir.written, f.data.size() - dir.written, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      finish(c, true);  // the receiver is gone
      return;
    }
    dir.written += static_cast<std::size_t>(n);
    dir.queued -= static_cast<std::size_t>(n);
    if (dir.written < f.data.size()) return;
    dir.queue.pop_front();
    dir.written = 0;
  }
}

void fault_proxy::impl::run() {
  std::vector<pollfd> fds;
  std::vector<std::pair<connection*, bool>> who;  // per pollfd past the first two: conn, is client fd
  for (;;) {
    {
      std::lock_guard lk(m);
      if (stopping) break;
    }
    apply_controls();
    const auto now = clock::now();
    const bool flowing = cur_mode == mode::pass;

    // Writes that are due, and closes whose queue has drained.
    for (auto& c : conns) {
      if (c.done) continue;
      if (flowing && !c.silent) {
        write_side(c, false, now);
        if (!c.done) write_side(c, true, now);
      }
      if (c.done) continue;
      if (c.silent) {
        // Nothing flows; a client that gives up ends the connection, a server that goes away
        // is not noticed by the client (it never hears anything again anyway).
        if (c.to_server.eof && cur_mode != mode::blackhole)
          finish(c, c.to_server.error);
        else if (c.to_client.eof)
          close_fd(c.server, false);
        continue;
      }
      if (!flowing) continue;
      if (c.to_server.eof && c.to_server.queue.empty())
        finish(c, c.to_server.error);
      else if (c.to_client.eof && c.to_client.queue.empty())
        finish(c, c.to_client.error);
    }
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->done) {
        it = conns.erase(it);
      } else {
        ++it;
      }
    }

    // What to wait for.
    fds.clear();
    who.clear();
    fds.push_back({wake[0], POLLIN, 0});
    fds.push_back({listener, POLLIN, 0});
    int timeout_ms = -1;
    for (auto& c : conns) {
      for (bool client_side : {true, false}) {
        int fd = client_side ? c.client : c.server;
        if (fd < 0) continue;
        auto& in = client_side ? c.to_server : c.to_client;   // read from this fd
        auto& out = client_side ? c.to_client : c.to_server;  // written to this fd
        short ev = 0;
        if (!in.eof && (c.silent || cur_mode == mode::blackhole || in.queued < max_queued)) ev |= POLLIN;
        if (flowing && !c.silent && !out.queue.empty()) {
          auto wait = std::chrono::ceil<std::chrono::milliseconds>(out.queue.front().due - now).count();
          if (wait <= 0) {
            ev |= POLLOUT;
          } else if (timeout_ms < 0 || wait < timeout_ms) {
            timeout_ms = static_cast<int>(wait);
          }
        }
        fds.push_back({fd, ev, 0});
        who.emplace_back(&c, client_side);
      }
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      char b[64];
      while (::read(wake[0], b, sizeof b) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) accept_all();
    for (std::size_t i = 2; i < fds.size(); ++i) {
      auto [c, client_side] = who[i - 2];
      if (c->done) continue;
      const short re = fds[i].revents;
      if ((re & (POLLIN | POLLHUP | POLLERR)) && (fds[i].events & POLLIN))
        read_side(*c, client_side);
      else if (re & (POLLHUP | POLLERR)) {
        auto& in = client_side ? c->to_server : c->to_client;
        in.eof = true;
        in.error = (re & POLLERR) != 0;
      }
    }
  }
  for (auto& c : conns) finish(c, true);
  conns.clear();
  std::lock_guard lk(m);
  stopping = true;
  applied_cv.notify_all();
}

// ------------------------------------------------------------------------ URLs

std::string replace_url_host(const std::string& url, const std::string& host, int port) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw std::invalid_argument("fault_proxy: not a server URL");
  const auto scheme = url.substr(0, scheme_end);
  if (scheme != "postgresql" && scheme != "postgres" && scheme != "mysql") {
    throw std::invalid_argument("fault_proxy: cannot wrap a " + scheme + " URL");
  }
  const auto auth_start = scheme_end + 3;
  auto auth_end = url.find_first_of("/?#", auth_start);
  if (auth_end == std::string::npos) auth_end = url.size();
  // The host follows the last '@' of the authority (a password may hold '@' only percent-encoded,
  // but be lenient).
  const auto at = url.rfind('@', auth_end == 0 ? 0 : auth_end - 1);
  const auto host_start = (at != std::string::npos && at >= auth_start) ? at + 1 : auth_start;
  return url.substr(0, host_start) + host + ":" + std::to_string(port) + url.substr(auth_end);
}

}  // namespace sqllock::test
