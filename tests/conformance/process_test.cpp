// Conformance: mutual exclusion across processes, checked by an exclusive marker and token order.
#include <filesystem>
#include <fstream>

#include "conformance/fixture.hpp"

using namespace sqllock_test;

TEST(Processes, MutualExclusionAndIncreasingTokensAcrossProcesses) {
  auto name = unique_name("xproc");
  auto dir = std::filesystem::temp_directory_path();
  auto marker = (dir / unique_name("marker")).string();
  auto log = (dir / unique_name("tokens")).string();
  constexpr int procs = 4, iterations = 15;
  std::vector<int> pids;
  for (int i = 0; i < procs; ++i) {
    pids.push_back(spawn_child("mutex_loop", {name, std::to_string(iterations), marker, log}));
  }
  for (int pid : pids) EXPECT_EQ(wait_child(pid), 0) << "3 = overlap in the critical section, 4 = token order";
  std::ifstream in(log);
  std::vector<std::int64_t> tokens;
  for (std::int64_t t; in >> t;) tokens.push_back(t);
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(procs * iterations));
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_GT(tokens[i], tokens[i - 1]) << "at " << i;
  std::filesystem::remove(log);
}
