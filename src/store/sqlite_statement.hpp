// Thin RAII helpers over the SQLite C API for the run store: a prepared statement that
// finalizes itself, and one-shot statements on a connection. Errors are not thrown: each
// call returns whether it worked and sqlite3_errmsg() says why.
//
// Thread-safety: none; the run store calls these under its own mutex.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace opsight::store {

class Statement {
 public:
  Statement(sqlite3* database, std::string_view sql) {
    if (sqlite3_prepare_v2(database, sql.data(), static_cast<int>(sql.size()), &statement_,
                           nullptr) != SQLITE_OK) {
      sqlite3_finalize(statement_);
      statement_ = nullptr;
    }
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return statement_ != nullptr; }

  bool bind(int index, int64_t value) {
    return sqlite3_bind_int64(statement_, index, value) == SQLITE_OK;
  }
  bool bind(int index, std::string_view text) {
    return sqlite3_bind_text64(statement_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8) == SQLITE_OK;
  }
  bool bind(int index, const std::string& text) { return bind(index, std::string_view(text)); }
  bool bind_blob(int index, std::string_view bytes) {
    return sqlite3_bind_blob64(statement_, index, bytes.data(), bytes.size(), SQLITE_STATIC) ==
           SQLITE_OK;
  }
  // Binds the arguments to parameters 1, 2, ... in order.
  template <typename... Values>
  bool bind_all(const Values&... values) {
    int index = 0;
    return (bind(++index, values) && ...);
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return sqlite3_step(statement_); }
  void reset() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }

  int64_t column_int64(int column) { return sqlite3_column_int64(statement_, column); }
  bool column_is_null(int column) { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
  std::string column_text(int column) {
    const unsigned char* text = sqlite3_column_text(statement_, column);
    if (text == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(text),
                       static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
  }
  std::string column_blob(int column) {
    const void* bytes = sqlite3_column_blob(statement_, column);
    if (bytes == nullptr) return {};
    return std::string(static_cast<const char*>(bytes),
                       static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
  }

 private:
  sqlite3_stmt* statement_ = nullptr;
};

class Connection {
 public:
  explicit Connection(sqlite3* database) : database_(database) {}

  // Runs one or more statements, discarding rows.
  bool exec(std::string_view sql) {
    std::string text(sql);
    return sqlite3_exec(database_, text.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  // The first column of the first row of `sql`, as an int.
  bool query_int(std::string_view sql, int* value) {
    Statement statement(database_, sql);
    if (!statement.ok()) return false;
    int status = statement.step();
    if (status != SQLITE_ROW) return false;
    *value = static_cast<int>(statement.column_int64(0));
    return true;
  }

 private:
  sqlite3* database_;
};

}  // namespace opsight::store
