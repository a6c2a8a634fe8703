// Unit tests of the embedded SQL table and placeholder rendering.
#include <gtest/gtest.h>

#include "core/backend.hpp"

using namespace sqllock::detail;

TEST(EmbeddedSql, StatementsAndMigrationsAreEmbedded) {
  EXPECT_NE(embedded_sql("sqlite", "lease_acquire").find("ON CONFLICT"), std::string_view::npos);
  EXPECT_THROW(embedded_sql("sqlite", "no_such_statement"), std::logic_error);
  auto migrations = embedded_migrations("sqlite");
  ASSERT_FALSE(migrations.empty());
  EXPECT_EQ(migrations.front().version, 1);
  EXPECT_EQ(migrations.back().version, required_schema_version);
}

TEST(EmbeddedSql, RenderQuotesTheTableNames) {
  EXPECT_EQ(render_sql("SELECT * FROM {{locks}} JOIN {{locks_schema}}", "app.locks", sqllock::dialect::postgresql),
            "SELECT * FROM \"app\".\"locks\" JOIN \"app\".\"locks_schema\"");
  EXPECT_EQ(render_sql("{{locks}}", "locks", sqllock::dialect::mysql), "`locks`");
  EXPECT_THROW(render_sql("{{nope}}", "locks", sqllock::dialect::mysql), std::logic_error);
  EXPECT_THROW(render_sql("{{locks}}", "bad name", sqllock::dialect::mysql), sqllock::invalid_argument);
}
