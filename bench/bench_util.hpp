// Benchmark helpers: clocks, sample statistics, figure records, JSON output, child processes, RSS.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include <sys/types.h>
#include <vector>

namespace bench {

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the machine, so a holder
/// and a waiter in different processes can subtract their readings.
std::int64_t now_ns();
inline double ns_to_ms(double ns) { return ns / 1e6; }
void sleep_ms(double ms);

/// A set of latency samples (nanoseconds).
struct samples {
  std::vector<std::int64_t> ns;
  double elapsed_s = 0;  ///< wall time spent producing them (for rates)

  void add(std::int64_t v) { ns.push_back(v); }
  std::size_t size() const { return ns.size(); }
  /// Percentile p in [0, 100] (nearest rank on a sorted copy), in milliseconds.
  double pct_ms(double p) const;
  double median_ms() const { return pct_ms(50); }
  double rate() const { return elapsed_s > 0 ? static_cast<double>(ns.size()) / elapsed_s : 0; }
};

/// One line of a backend's table: a measured value beside the baseline it is divided by.
struct figure {
  std::string scenario;  ///< "1 uncontended", ...
  std::string measure;   ///< what was measured
  std::string unit;      ///< "ms", "ops/s", ...
  double value = 0;
  std::string baseline;  ///< the baseline's name; empty: the figure is itself a ratio or a count
  double baseline_value = 0;
  std::optional<double> ratio;  ///< value / baseline_value
  std::string target;           ///< e.g. "<= 1.15"; empty: no target
  std::optional<bool> met;      ///< nullopt: no target
  std::string note;
};

/// Everything measured for one backend (or one failure).
struct report {
  std::string backend;
  bool quick = false;
  std::vector<figure> figures;
  std::vector<std::string> failures;  ///< real failures (oversell, exclusion broken, crash)
  std::vector<std::string> notes;
  /// Hand-off latency distributions per strategy, for the chart: name -> latencies in ms.
  std::map<std::string, std::vector<double>> handoff_ms;

  figure& add(figure f) {
    if (f.ratio == std::nullopt && !f.baseline.empty() && f.baseline_value != 0)
      f.ratio = f.value / f.baseline_value;
    figures.push_back(std::move(f));
    return figures.back();
  }
};

/// "1.23", "12.3", "1234" ... with sensible significant digits.
std::string fmt(double v);
std::string json_escape(const std::string& s);
/// The report as a JSON object.
std::string to_json(const report& r);
/// The report as a Markdown table (with a heading) for stdout.
std::string to_markdown(const report& r);

/// A child process running this program with other arguments; its stdin/stdout are our pipes.
class child_process {
 public:
  explicit child_process(const std::vector<std::string>& args);
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  void send(const std::string& line);  ///< writes line + '\n'
  /// One line without '\n'. Throws if the child died: the message says how (exit status or
  /// signal) and ends with the last 2,000 characters the child wrote to stderr.
  std::string receive();
  /// Wait for exit; returns the exit status (or 128 + signal).
  int wait();
  /// Wait for exit; throws unless it exited with status 0 (the message says how it ended and
  /// ends with its stderr).
  void wait_ok(const std::string& what);
  int pid() const { return pid_; }

 private:
  /// Not yet reported stderr of the child (at most the last `max` characters; 0: all).
  std::string stderr_text(std::size_t max);
  /// How the child ended (waits up to 5 s for it) and its stderr, for an exception message.
  std::string death_report();

  std::string role_;  ///< "waiter", "contend", ...: for messages
  int pid_ = -1;
  std::FILE* err_ = nullptr;  ///< the child's stderr (an unlinked temporary file)
  off_t err_reported_ = 0;
  std::FILE* to_ = nullptr;
  std::FILE* from_ = nullptr;
  bool waited_ = false;
};

/// Resident set size of this process in KiB (from /proc/self/statm).
std::int64_t rss_kib();

/// Path of this executable (for re-running it as a child).
std::string self_exe();

/// Split on whitespace.
std::vector<std::string> split(const std::string& s);

}  // namespace bench
