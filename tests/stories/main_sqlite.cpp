// The story tests against SQLite: a fresh database file in a temporary directory.
#include <unistd.h>

#include <filesystem>

#include "story_fixture.hpp"

int main(int argc, char** argv) {
  const auto dir = std::filesystem::temp_directory_path() / ("sqllock-stories-sqlite-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int rc = stories::run_stories(argc, argv, {.name = "sqlite", .url = "sqlite:" + (dir / "stories.db").string()});
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}
