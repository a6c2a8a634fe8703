// The seven benchmark scenarios and the child-process roles they spawn.
#pragma once

#include <string>

#include "bench_util.hpp"

namespace bench {

/// What one `sqllock_bench run` measures.
struct config {
  std::string backend;    ///< "sqlite", "postgresql" or "mysql"
  std::string url;        ///< the application URL sqllock and the baselines connect to
  std::string admin_url;  ///< MySQL: an account allowed SET GLOBAL (scenario 6); may be empty
  std::string out_dir;    ///< where hand-off data files go
  bool quick = false;
  long stock = 0;  ///< scenario 6 stock; 0: the mode's default
};

void scenario_uncontended(const config& cfg, report& rep);
void scenario_handoff(const config& cfg, report& rep);
void scenario_contention(const config& cfg, report& rep);
void scenario_scale(const config& cfg, report& rep);
void scenario_many_leases(const config& cfg, report& rep);
void scenario_inventory(const config& cfg, report& rep);
/// A Galera cluster (SQLLOCK_TEST_GALERA_URL1/2) against the single server of cfg.url; skipped
/// with a printed reason when the cluster is not given.
void scenario_galera(const config& cfg, report& rep);
/// Semaphore throughput: 3 permits, 6 clients, against 3 plain lease names with 2 clients each.
void scenario_semaphore(const config& cfg, report& rep);

/// `sqllock_bench profile --url URL --what sqllock|sqllock-silent|shedlock [--count N]`: one client
/// doing uncontended acquire + release and nothing else, to run under perf, strace or valgrind.
int profile_main(const std::string& url, const std::string& what, long count);

/// Entry point of a child process (`sqllock_bench child ROLE ...`); returns its exit code.
int child_main(int argc, char** argv);

}  // namespace bench
