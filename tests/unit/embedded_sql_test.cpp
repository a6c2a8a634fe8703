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

TEST(EmbeddedSql, APartIsRenderedInPlaceAndSharedByTheStatementsThatUseIt) {
  // {{part:NAME}} is sql/<dialect>/part_NAME.sql, itself rendered (its own placeholders and parts).
  const std::string durable = render_sql("WITH {{part:durable}} SELECT 1", "locks", sqllock::dialect::postgresql);
  EXPECT_NE(durable.find("set_config('synchronous_commit', 'on', true)"), std::string::npos) << durable;
  EXPECT_EQ(durable.find("{{"), std::string::npos) << durable;
  EXPECT_TRUE(durable.ends_with(") SELECT 1")) << "a part ends without its file's newline: " << durable;
  const std::string epoch = render_sql("WITH {{part:epoch}} SELECT 1", "locks", sqllock::dialect::postgresql);
  EXPECT_NE(epoch.find("pg_walfile_name(pg_current_wal_lsn())"), std::string::npos) << "a part inside a part: " << epoch;
  EXPECT_THROW(render_sql("{{part:no_such_part}}", "locks", sqllock::dialect::postgresql), std::logic_error);
  // Every PostgreSQL statement that forces a durable commit takes it from the one part.
  for (const char* statement : {"lease_acquire", "lease_release", "lease_renew", "fair_release"}) {
    const std::string_view text = embedded_sql("postgresql", statement);
    EXPECT_NE(text.find("{{part:durable}}"), std::string_view::npos) << statement;
    EXPECT_EQ(text.find("set_config('synchronous_commit'"), std::string_view::npos) << statement << " has its own copy";
    EXPECT_NE(render_sql(text, "locks", sqllock::dialect::postgresql).find("set_config('synchronous_commit'"),
              std::string::npos)
        << statement;
  }
}

TEST(EmbeddedSql, ThePlainAndTheFencedAcquireShareOneConflictClausePerDialect) {
  // The part that decides who may take a row (free, expired, or this owner's own retried acquire)
  // exists once per dialect; the plain and the reader-writer (fenced) acquire differ only in the
  // token a new acquisition gets.
  struct statement {
    const char* dialect;
    const char* name;
    const char* part;
  };
  for (const statement& s : {statement{"postgresql", "lease_acquire", "acquire_conflict"},
                             statement{"postgresql", "lease_acquire_fenced", "acquire_conflict"},
                             statement{"sqlite", "lease_acquire", "acquire_conflict"},
                             statement{"sqlite", "lease_acquire_fenced", "acquire_conflict"},
                             statement{"mysql", "part_acquire_upsert", "acquire_conflict"},
                             statement{"mysql", "part_acquire_fenced_upsert", "acquire_conflict"},
                             statement{"mysql", "lease_acquire", "acquire_upsert"},
                             statement{"mysql", "lease_acquire_no_returning", "acquire_upsert"},
                             statement{"mysql", "lease_acquire_fenced", "acquire_fenced_upsert"},
                             statement{"mysql", "lease_acquire_fenced_no_returning", "acquire_fenced_upsert"}}) {
    const std::string_view text = embedded_sql(s.dialect, s.name);
    EXPECT_NE(text.find("{{part:" + std::string(s.part) + "}}"), std::string_view::npos) << s.dialect << " " << s.name;
    EXPECT_EQ(text.find("hold_count = "), std::string_view::npos) << s.dialect << " " << s.name << " has its own copy";
    EXPECT_EQ(text.find("hold_count  = "), std::string_view::npos) << s.dialect << " " << s.name << " has its own copy";
  }
}
