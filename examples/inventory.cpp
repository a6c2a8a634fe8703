// Example: sell from a stock table without overselling, with a retry-safe idempotency key.
//   example_inventory URL
// Creates a small `example_stock` table, then places orders the way a web handler would.
#include <sqllock/inventory.hpp>
#include <sqllock/sqllock.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: example_inventory URL   (e.g. sqlite:shop.db)\n";
    return 64;
  }
  try {
    sqllock::client_options options;
    options.require_schema = false;
    auto client = sqllock::connect(argv[1], options);
    client.migrate();                           // the lock tables (idempotent)
    sqllock::create_idempotency_table(client);  // the idempotency keys (idempotent)
    {
      auto tx = client.begin();
      tx.execute(
          "CREATE TABLE IF NOT EXISTS example_stock (sku VARCHAR(64) PRIMARY KEY, qty BIGINT NOT NULL, "
          "version BIGINT NOT NULL DEFAULT 1)");
      tx.execute("DELETE FROM example_stock");
      tx.execute("INSERT INTO example_stock (sku, qty) VALUES ('mug', 3), ('tea', 10)");
      tx.commit();
    }
    const sqllock::stock_table stock{.table = "example_stock", .key_column = "sku", .quantity_column = "qty"};

    // One item, the cheapest way: a conditional UPDATE.
    auto one = sqllock::decrement(client, stock, std::string("mug"), 1);
    std::cout << "mug: " << (one.applied() ? "sold, " + std::to_string(one.new_quantity()) + " left" : "refused")
              << "\n";

    // An order of several items, all or nothing, locked in key order (no deadlocks), with an
    // idempotency key: a client that retries after a lost answer does not buy twice.
    sqllock::reserve_options order;
    order.strategy = sqllock::stock_strategy::for_update;
    const std::string order_id = "order-" + client.holder_id();  // unique per run of this example
    order.idempotency_key = order_id;
    const std::vector<sqllock::stock_item> items{{std::string("tea"), 4}, {std::string("mug"), 2}};
    for (int attempt = 1; attempt <= 2; ++attempt) {  // the second is the "retry"
      auto r = sqllock::reserve(client, stock, items, order);
      std::cout << "order attempt " << attempt << ": "
                << (r.applied()                                                  ? "applied"
                    : r.outcome == sqllock::reserve_result::status::insufficient ? "insufficient"
                                                                                 : "not applied")
                << (r.replayed ? " (replayed, nothing changed)" : "") << "\n";
    }
    auto too_many = sqllock::decrement(client, stock, std::string("mug"), 5);
    if (too_many.outcome == sqllock::reserve_result::status::insufficient) {
      std::cout << "mug x5: insufficient, only " << too_many.available << " left\n";
    }
  } catch (const sqllock::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
