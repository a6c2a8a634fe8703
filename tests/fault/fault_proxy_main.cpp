// The fault proxy as a program: forwards to a server and takes fault commands on stdin, one per line.
//
//   fault_proxy --upstream HOST:PORT [--listen-port N]
//
// Prints "port N" on stdout once it listens, then reads commands and answers each with "ok" (or
// "error: ..."): pass | blackhole | hold | lose-answer | lose-answer-reset | delay MS | cut |
// cut-silenced | stats | quit. `stats` answers "ok open=N accepted=N answers_lost=N
// bytes_dropped=N cut=N refused=N". End of input is quit.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>

#include "common/fault_proxy.hpp"

namespace {

int usage() {
  std::cerr << "usage: fault_proxy --upstream HOST:PORT [--listen-port N]\n";
  return 64;
}

bool to_int(const std::string& s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

int main(int argc, char** argv) {
  std::string upstream;
  int listen_port = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--upstream" && i + 1 < argc) {
      upstream = argv[++i];
    } else if (a == "--listen-port" && i + 1 < argc) {
      if (!to_int(argv[++i], listen_port)) return usage();
    } else {
      return usage();
    }
  }
  const auto colon = upstream.rfind(':');
  int upstream_port = 0;
  if (colon == std::string::npos || !to_int(upstream.substr(colon + 1), upstream_port)) return usage();
  std::string host = upstream.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    sqllock::test::fault_proxy proxy(host, upstream_port, listen_port);
    std::cout << "port " << proxy.port() << std::endl;
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::string cmd;
      in >> cmd;
      if (cmd.empty()) continue;
      if (cmd == "quit") break;
      if (cmd == "pass") {
        proxy.pass();
      } else if (cmd == "blackhole") {
        proxy.blackhole();
      } else if (cmd == "hold") {
        proxy.hold();
      } else if (cmd == "lose-answer") {
        proxy.lose_next_answer();
      } else if (cmd == "lose-answer-reset") {
        proxy.lose_next_answer(true);
      } else if (cmd == "delay") {
        long ms = -1;
        if (!(in >> ms) || ms < 0) {
          std::cout << "error: delay MS" << std::endl;
          continue;
        }
        proxy.delay(std::chrono::milliseconds(ms));
      } else if (cmd == "cut") {
        proxy.cut();
      } else if (cmd == "cut-silenced") {
        proxy.cut_silenced();
      } else if (cmd == "stats") {
        std::cout << "ok open=" << proxy.connections() << " accepted=" << proxy.accepted()
                  << " answers_lost=" << proxy.answers_lost() << " bytes_dropped=" << proxy.bytes_dropped()
                  << " cut=" << proxy.connections_cut() << " refused=" << proxy.upstream_refused() << std::endl;
        continue;
      } else {
        std::cout << "error: unknown command " << cmd << std::endl;
        continue;
      }
      std::cout << "ok" << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "fault_proxy: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
