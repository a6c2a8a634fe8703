// The conformance suite against one node of a MariaDB Galera cluster (URL from
// scripts/galera-cluster.sh: node 2, so the suite's writes are certified against a cluster it did
// not bootstrap). A missing SQLLOCK_TEST_GALERA_URL2 fails it.
#include <cstdlib>
#include <iostream>

#include "conformance/fixture.hpp"

int main(int argc, char** argv) {
  const char* url = std::getenv("SQLLOCK_TEST_GALERA_URL2");
  if (!url || !*url) {
    std::cerr << "conformance_galera: SQLLOCK_TEST_GALERA_URL2 is not set; start the cluster with "
                 "scripts/galera-cluster.sh (scripts/test-all.sh does). This is a failure, not a skip.\n";
    return 2;
  }
  // The backend is MySQL (errors name it); what differs is the cluster behind the node.
  return sqllock_test::run_suite(argc, argv, {.name = "mysql", .url = url, .multi_primary = true});
}
