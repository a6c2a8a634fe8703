// Statement splitting per dialect and the SHA-256 checksum (pure functions; no database).
#include <gtest/gtest.h>

#include "sqllock/error.hpp"
#include "sqllock/migrations.hpp"

namespace {

using sqllock::dialect;
using sqllock::split_sql_statements;
using list = std::vector<std::string>;

TEST(Split, PlainStatementsAndBlanks) {
  for (auto d : {dialect::sqlite, dialect::postgresql, dialect::mysql}) {
    EXPECT_EQ(split_sql_statements("CREATE TABLE a (x int);\n\n  INSERT INTO a VALUES (1) ;;\n", d),
              (list{"CREATE TABLE a (x int)", "INSERT INTO a VALUES (1)"}));
    EXPECT_EQ(split_sql_statements("SELECT 1", d), (list{"SELECT 1"}));
    EXPECT_TRUE(split_sql_statements("  -- only a comment\n/* and another; */\n", d).empty());
  }
}

TEST(Split, SemicolonsInsideStringsAndComments) {
  for (auto d : {dialect::sqlite, dialect::postgresql, dialect::mysql}) {
    EXPECT_EQ(split_sql_statements("INSERT INTO t VALUES ('a;b', 'it''s; fine'); -- x; y\nSELECT \"c;d\" FROM t;", d),
              (list{"INSERT INTO t VALUES ('a;b', 'it''s; fine')", "-- x; y\nSELECT \"c;d\" FROM t"}));
    EXPECT_EQ(split_sql_statements("SELECT 1 /* ; */ ; SELECT 2", d), (list{"SELECT 1 /* ; */", "SELECT 2"}));
  }
}

TEST(Split, MysqlBackslashesBackticksHashAndDelimiter) {
  EXPECT_EQ(split_sql_statements("INSERT INTO t VALUES ('a\\';b'); SELECT `x;y` FROM t # c;d\n;", dialect::mysql),
            (list{"INSERT INTO t VALUES ('a\\';b')", "SELECT `x;y` FROM t # c;d"}));
  const std::string proc =
      "CREATE TABLE t (x INT);\n"
      "DELIMITER //\n"
      "CREATE PROCEDURE p() BEGIN INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); END//\n"
      "delimiter ;\n"
      "CALL p();\n";
  EXPECT_EQ(split_sql_statements(proc, dialect::mysql),
            (list{"CREATE TABLE t (x INT)",
                  "CREATE PROCEDURE p() BEGIN INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); END", "CALL p()"}));
  // In PostgreSQL, a backslash in a plain string is an ordinary character.
  EXPECT_EQ(split_sql_statements("SELECT 'a\\'; SELECT 2", dialect::postgresql), (list{"SELECT 'a\\'", "SELECT 2"}));
  EXPECT_EQ(split_sql_statements("SELECT E'a\\';b'; SELECT 2", dialect::postgresql),
            (list{"SELECT E'a\\';b'", "SELECT 2"}));
}

TEST(Split, PostgresqlDollarQuotingAndNestedComments) {
  const std::string fn =
      "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$;\n"
      "CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$ SELECT 'x;$$;y' $body$;\n"
      "/* outer /* inner; */ still; */ SELECT $1a$;";
  EXPECT_EQ(split_sql_statements(fn, dialect::postgresql),
            (list{"CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$",
                  "CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$ SELECT 'x;$$;y' $body$",
                  "/* outer /* inner; */ still; */ SELECT $1a$"}));
  const std::string atomic =
      "CREATE FUNCTION h() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END;\n"
      "SELECT 3;";
  EXPECT_EQ(
      split_sql_statements(atomic, dialect::postgresql),
      (list{"CREATE FUNCTION h() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END",
            "SELECT 3"}));
}

TEST(Split, SqliteTriggerBodies) {
  const std::string trg =
      "CREATE TABLE a (x);\n"
      "CREATE TEMP TRIGGER tr AFTER INSERT ON a BEGIN INSERT INTO b VALUES (new.x); "
      "UPDATE c SET n = CASE WHEN n > 0 THEN n ELSE 0 END; END;\n"
      "INSERT INTO a VALUES (1);";
  EXPECT_EQ(split_sql_statements(trg, dialect::sqlite),
            (list{"CREATE TABLE a (x)",
                  "CREATE TEMP TRIGGER tr AFTER INSERT ON a BEGIN INSERT INTO b VALUES (new.x); UPDATE c SET n = CASE "
                  "WHEN n > 0 THEN n ELSE 0 END; END",
                  "INSERT INTO a VALUES (1)"}));
  EXPECT_EQ(split_sql_statements("SELECT [a;b] FROM t; SELECT 2", dialect::sqlite),
            (list{"SELECT [a;b] FROM t", "SELECT 2"}));
  EXPECT_EQ(split_sql_statements("SELECT `a;b` FROM t; SELECT 2", dialect::sqlite),
            (list{"SELECT `a;b` FROM t", "SELECT 2"}));
}

TEST(Split, UnterminatedIsAnErrorWithTheLine) {
  try {
    split_sql_statements("SELECT 1;\nSELECT 'oops;\n", dialect::sqlite);
    FAIL() << "no error";
  } catch (const sqllock::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(split_sql_statements("SELECT $$ x", dialect::postgresql), sqllock::invalid_argument);
  EXPECT_THROW(split_sql_statements("/* x", dialect::mysql), sqllock::invalid_argument);
}

TEST(Checksum, Sha256KnownVectors) {
  EXPECT_EQ(sqllock::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sqllock::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sqllock::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sqllock::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
