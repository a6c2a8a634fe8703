// The table of SQL files embedded at build time (generated embedded_sql.cpp defines it).
#pragma once

#include <cstddef>

namespace sqllock::detail {

struct embedded_file {
  const char* path;  ///< relative to the source root, e.g. "sql/sqlite/lease_acquire.sql"
  const char* text;
};

extern const embedded_file embedded_files[];
extern const std::size_t embedded_file_count;

}  // namespace sqllock::detail
