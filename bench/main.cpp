// sqllock_bench: runs the scenarios for one backend, prints its Markdown table, writes its JSON.
//
//   sqllock_bench run --backend postgresql --url URL [--admin-url URL] [--quick] --out DIR [--only 1,3] [--stock N]
//   sqllock_bench profile --url URL --what sqllock|sqllock-silent|shedlock [--count N]
//                                    (uncontended acquire + release only, for perf / strace / valgrind)
//   sqllock_bench backends           (the backends built in)
//   sqllock_bench child ROLE ...     (internal: the other processes of scenarios 2, 3 and 5)
//
// Exit status: 0 when every scenario ran and no correctness check failed (missed speed targets
// only print MISSED), 2 when a check failed (oversell, broken exclusion) or a scenario crashed.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "scenarios.hpp"

namespace {

int usage() {
  std::cerr << "usage: sqllock_bench run --backend sqlite|postgresql|mysql --url URL [--admin-url URL] [--quick] "
               "--out DIR [--only 1,2,...] [--stock N]\n"
               "       sqllock_bench profile --url URL --what sqllock|sqllock-silent|shedlock [--count N]\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "child") return bench::child_main(argc, argv);
  if (argc == 2 && std::string(argv[1]) == "backends") {  // the backends built in, for run.sh
#ifdef BENCH_HAVE_SQLITE
    std::cout << "sqlite\n";
#endif
#ifdef BENCH_HAVE_POSTGRESQL
    std::cout << "postgresql\n";
#endif
#ifdef BENCH_HAVE_MYSQL
    std::cout << "mysql\n";
#endif
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == "profile") {
    std::string url, what = "sqllock";
    long count = 2000;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--url") url = argv[i + 1];
      else if (a == "--what") what = argv[i + 1];
      else if (a == "--count") count = std::stol(argv[i + 1]);
      else return usage();
    }
    if (url.empty()) return usage();
    try {
      return bench::profile_main(url, what, count);
    } catch (const std::exception& e) {
      std::cerr << "sqllock_bench profile: " << e.what() << std::endl;
      return 1;
    }
  }
  if (argc < 2 || std::string(argv[1]) != "run") return usage();
  bench::config cfg;
  std::set<int> only;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--backend") {
      cfg.backend = next();
    } else if (a == "--url") {
      cfg.url = next();
    } else if (a == "--admin-url") {
      cfg.admin_url = next();
    } else if (a == "--out") {
      cfg.out_dir = next();
    } else if (a == "--stock") {
      cfg.stock = std::stol(next());
    } else if (a == "--quick") {
      cfg.quick = true;
    } else if (a == "--only") {
      std::string v = next();
      for (char c : v)
        if (c >= '1' && c <= '8') only.insert(c - '0');
    } else {
      return usage();
    }
  }
  if (cfg.backend.empty() || cfg.url.empty() || cfg.out_dir.empty()) return usage();

  bench::report rep;
  rep.backend = cfg.backend;
  rep.quick = cfg.quick;
  const std::vector<std::pair<int, void (*)(const bench::config&, bench::report&)>> scenarios{
      {1, bench::scenario_uncontended}, {2, bench::scenario_handoff},     {3, bench::scenario_contention},
      {4, bench::scenario_scale},       {5, bench::scenario_many_leases}, {6, bench::scenario_inventory},
      {7, bench::scenario_galera},      {8, bench::scenario_semaphore}};
  for (const auto& [n, fn] : scenarios) {
    if (!only.empty() && !only.contains(n)) continue;
    const auto t0 = bench::now_ns();
    std::cerr << "sqllock_bench: " << cfg.backend << ": scenario " << n << " ..." << std::flush;
    try {
      fn(cfg, rep);
    } catch (const std::exception& e) {
      rep.failures.push_back("scenario " + std::to_string(n) + " crashed: " + e.what());
    }
    std::cerr << " " << bench::fmt(static_cast<double>(bench::now_ns() - t0) / 1e9) << " s" << std::endl;
  }

  std::cout << bench::to_markdown(rep) << std::endl;
  std::ofstream(cfg.out_dir + "/" + cfg.backend + ".json") << bench::to_json(rep) << "\n";
  // One data file per hand-off strategy for the chart: latency (ms) and cumulative fraction.
  for (const auto& [name, v] : rep.handoff_ms) {
    auto sorted = v;
    std::sort(sorted.begin(), sorted.end());
    std::string file;
    for (char c : name) file += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::ofstream out(cfg.out_dir + "/handoff-" + cfg.backend + "-" + file + ".dat");
    out << "# " << cfg.backend << ": " << name << "\n";
    for (std::size_t i = 0; i < sorted.size(); ++i)
      out << sorted[i] << " " << static_cast<double>(i + 1) / static_cast<double>(sorted.size()) << "\n";
  }
  return rep.failures.empty() ? 0 : 2;
}
