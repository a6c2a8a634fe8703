// Benchmark helpers: clocks, percentiles, Markdown/JSON output, child processes over pipes, RSS.
#include "bench_util.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace bench {

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<std::int64_t>(ms * 1e6)));
}

double samples::pct_ms(double p) const {
  if (ns.empty()) return 0;
  std::vector<std::int64_t> v = ns;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  if (rank == 0) rank = 1;
  if (rank > v.size()) rank = v.size();
  return ns_to_ms(static_cast<double>(v[rank - 1]));
}

std::string fmt(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return "inf";
  char buf[64];
  const double a = std::fabs(v);
  if (a == 0)
    return "0";
  else if (a >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 100)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 1)
    std::snprintf(buf, sizeof buf, "%.2f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o;
}

namespace {
std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
std::string jstr(const std::string& s) { return "\"" + json_escape(s) + "\""; }
}  // namespace

std::string to_json(const report& r) {
  std::ostringstream o;
  o << "{\"backend\": " << jstr(r.backend) << ", \"quick\": " << (r.quick ? "true" : "false")
    << ",\n \"figures\": [";
  for (std::size_t i = 0; i < r.figures.size(); ++i) {
    const auto& f = r.figures[i];
    o << (i ? ",\n  " : "\n  ") << "{\"scenario\": " << jstr(f.scenario) << ", \"measure\": " << jstr(f.measure)
      << ", \"unit\": " << jstr(f.unit) << ", \"value\": " << jnum(f.value)
      << ", \"baseline\": " << jstr(f.baseline) << ", \"baseline_value\": " << jnum(f.baseline_value)
      << ", \"ratio\": " << (f.ratio ? jnum(*f.ratio) : "null") << ", \"target\": " << jstr(f.target)
      << ", \"met\": " << (f.met ? (*f.met ? "true" : "false") : "null") << ", \"note\": " << jstr(f.note) << "}";
  }
  o << "],\n \"failures\": [";
  for (std::size_t i = 0; i < r.failures.size(); ++i) o << (i ? ", " : "") << jstr(r.failures[i]);
  o << "],\n \"notes\": [";
  for (std::size_t i = 0; i < r.notes.size(); ++i) o << (i ? ", " : "") << jstr(r.notes[i]);
  o << "],\n \"handoff_ms\": {";
  bool first = true;
  for (const auto& [name, v] : r.handoff_ms) {
    o << (first ? "" : ", ") << jstr(name) << ": [";
    for (std::size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << jnum(v[i]);
    o << "]";
    first = false;
  }
  o << "}}";
  return o.str();
}

std::string to_markdown(const report& r) {
  std::ostringstream o;
  o << "### " << r.backend << (r.quick ? " (quick mode)" : "") << "\n\n";
  o << "| scenario | measure | sqllock | baseline (same run) | baseline value | ratio | target | result |\n";
  o << "|---|---|---:|---|---:|---:|---|---|\n";
  for (const auto& f : r.figures) {
    std::string result = f.met ? (*f.met ? "met" : "**MISSED**") : "";
    if (!f.note.empty()) result += (result.empty() ? "" : " ") + ("(" + f.note + ")");
    o << "| " << f.scenario << " | " << f.measure << " | " << fmt(f.value) << (f.unit.empty() ? "" : " " + f.unit)
      << " | " << f.baseline << " | "
      << (f.baseline.empty() ? "" : fmt(f.baseline_value) + (f.unit.empty() ? "" : " " + f.unit)) << " | "
      << (f.ratio ? fmt(*f.ratio) + "x" : "") << " | " << f.target << " | " << result << " |\n";
  }
  for (const auto& n : r.notes) o << "\n- " << n;
  for (const auto& f : r.failures) o << "\n- **FAILURE**: " << f;
  o << "\n";
  return o.str();
}

child_process::child_process(const std::vector<std::string>& args) : role_(args.size() > 1 ? args[1] : "") {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
  // The child's stderr goes to an unlinked temporary file, so that when it dies its last words can
  // be put into the parent's report (CI shows only a part of the run's stderr).
  err_ = std::tmpfile();
  if (!err_) throw std::runtime_error(std::string("tmpfile failed: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fileno(err_), 2);
  posix_spawn_file_actions_addclose(&fa, to_child[1]);
  posix_spawn_file_actions_addclose(&fa, from_child[0]);
  std::vector<std::string> full{self_exe()};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, full[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(to_child[0]);
  close(from_child[1]);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
  to_ = fdopen(to_child[1], "w");
  from_ = fdopen(from_child[0], "r");
}

child_process::~child_process() {
  if (to_) std::fclose(to_);
  if (from_) std::fclose(from_);
  if (!waited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  if (err_) {
    // Whatever the child wrote to stderr and nobody reported yet (warnings of a child that
    // finished well included) still reaches ours, as it did before it went to a file.
    const auto rest = stderr_text(0);
    if (!rest.empty()) std::fputs(rest.c_str(), stderr);
    std::fclose(err_);
  }
}

std::string child_process::stderr_text(std::size_t max) {
  if (!err_) return "";
  std::fflush(err_);
  const int fd = fileno(err_);
  const off_t end = lseek(fd, 0, SEEK_END);
  if (end <= err_reported_) return "";
  off_t from = err_reported_;
  if (max > 0 && end - from > static_cast<off_t>(max)) from = end - static_cast<off_t>(max);
  std::string s(static_cast<std::size_t>(end - from), '\0');
  const auto n = pread(fd, s.data(), s.size(), from);
  s.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  err_reported_ = end;
  return s;
}

std::string child_process::death_report() {
  // The pipe closed: the child exited or is about to. Give it up to 5 s to be reaped, so the
  // report says how it ended (a child that closed stdout and lives on is said to be still running).
  int st = 0;
  pid_t r = 0;
  for (int i = 0; i < 500 && (r = waitpid(pid_, &st, WNOHANG)) == 0; ++i) sleep_ms(10);
  std::string how;
  if (r == pid_) {
    waited_ = true;
    if (WIFEXITED(st))
      how = "exit status " + std::to_string(WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
      how = std::string("killed by signal ") + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")" +
            (WCOREDUMP(st) ? ", core dumped" : "");
    else
      how = "wait status " + std::to_string(st);
  } else {
    how = "closed its stdout but is still running";
  }
  std::string err = stderr_text(2000);
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  for (auto& c : err)
    if (c == '\n') c = '|';
  return how + (err.empty() ? "; its stderr is empty" : "; its stderr: " + err);
}

void child_process::send(const std::string& line) {
  std::fputs((line + "\n").c_str(), to_);
  std::fflush(to_);
}

std::string child_process::receive() {
  char* buf = nullptr;
  size_t cap = 0;
  const auto n = getline(&buf, &cap, from_);
  if (n <= 0) {
    std::free(buf);
    throw std::runtime_error("child process " + std::to_string(pid_) + " (" + role_ + ") ended unexpectedly: " +
                             death_report());
  }
  std::string s(buf, static_cast<std::size_t>(n));
  std::free(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

int child_process::wait() {
  if (to_) {
    std::fclose(to_);
    to_ = nullptr;
  }
  int st = 0;
  waitpid(pid_, &st, 0);
  waited_ = true;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 255;
}

void child_process::wait_ok(const std::string& what) {
  const int st = wait();
  if (st == 0) return;
  std::string err = stderr_text(2000);
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  for (auto& c : err)
    if (c == '\n') c = '|';
  throw std::runtime_error(what + " (process " + std::to_string(pid_) + ") failed: " +
                           (st > 128 ? "killed by signal " + std::to_string(st - 128)
                                     : "exit status " + std::to_string(st)) +
                           (err.empty() ? "; its stderr is empty" : "; its stderr: " + err));
}

std::int64_t rss_kib() {
  std::ifstream f("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

std::string self_exe() {
  char buf[4096];
  const auto n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace bench
