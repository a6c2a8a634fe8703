// The story tests against SQLite: a fresh database file in a temporary directory, removed after the
// run. A child role (a story's own process, which may be killed) uses the parent's file and makes
// no directory of its own.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "story_fixture.hpp"

int main(int argc, char** argv) {
  if (const char* url = std::getenv("SQLLOCK_STORIES_URL"); url && std::getenv("SQLLOCK_STORIES_ROLE"))
    return stories::run_stories(argc, argv, {.name = "sqlite", .url = url});
  const auto dir = std::filesystem::temp_directory_path() / ("sqllock-stories-sqlite-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const int rc = stories::run_stories(argc, argv, {.name = "sqlite", .url = "sqlite:" + (dir / "stories.db").string()});
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}
