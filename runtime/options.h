#pragma once

// Options: the one options table every constructor takes (Torch7's style), checked here on the
// C++ side so that every front end gets the same errors. A reader takes each key it knows,
// typed and range-checked; `finish()` then rejects whatever key nobody took, naming it and
// listing the valid ones.

#include <any>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace memscript {

// An error in what the user asked for (an option, a value, a file). Front ends show the
// message as it is, prefixed with where in the script it happened.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Options;

// A list is a Lua sequence ({48, 64} or {"lstm", "gpt"}).
struct OptionValue;
using OptionList = std::vector<OptionValue>;

struct OptionValue {
  // Objects (a model, a task) travel as std::any holding a shared_ptr of their base type.
  using Storage = std::variant<bool, int64_t, double, std::string, std::shared_ptr<Options>,
                               std::shared_ptr<OptionList>, std::any>;
  Storage value;

  std::string type_name()
      const;                 // "boolean", "integer", "number", "string", "table", "list", "object"
  std::string show() const;  // the value as the user wrote it, for error messages
  // The value as an integer: an integer, or a whole number (Lua writes 1e9 as a float); none
  // for anything else.
  std::optional<int64_t> whole_number() const;
};

// An option value written in C++: the presets' defaults (decoder.cpp, mixer.cpp).
inline OptionValue option(int number) { return {int64_t{number}}; }
inline OptionValue option(bool flag) { return {flag}; }
inline OptionValue option(const char* text) { return {std::string(text)}; }

// Integer bounds; both ends inclusive.
struct IntRange {
  int64_t min = INT64_MIN;
  int64_t max = INT64_MAX;
};

class Options {
 public:
  explicit Options(std::string context);

  const std::string& context() const { return context_; }
  void set(const std::string& key, OptionValue value);
  // Sets `key` unless the user gave it, and lets it go unread: presets fill in keys that only
  // some mixers use.
  void set_default(const std::string& key, OptionValue value);
  bool has(const std::string& key) const;

  // Typed reads. Each marks the key as known; a missing key gives the default, a value of the
  // wrong type or out of range throws a UserError naming the key and the value.
  int64_t integer(const std::string& key, int64_t fallback, IntRange range = {});
  std::optional<int64_t> optional_integer(const std::string& key, IntRange range = {});
  double number(const std::string& key, double fallback, double min = -INFINITY,
                double max = INFINITY);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& choices = {});
  std::optional<std::string> optional_string(const std::string& key);
  std::vector<int64_t> integers(const std::string& key, const std::vector<int64_t>& fallback,
                                IntRange range = {});
  std::vector<double> numbers(const std::string& key, const std::vector<double>& fallback);
  // A nested options table, or an empty one named after the key when absent.
  Options table(const std::string& key);
  const OptionValue* raw(const std::string& key);  // the value as given, or null; marks it known

  template <typename T>
  std::shared_ptr<T> object(const std::string& key, const std::string& what);
  // An object the bindings store by value (a tensor), checked as object() checks.
  template <typename T>
  T object_value(const std::string& key, const std::string& what);

  // Throws on every key that no read asked for. Call after the last read.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const OptionValue* take(const std::string& key);
  std::optional<std::vector<Options>> items(const std::string& key, const char* what);

  std::string context_;
  std::map<std::string, OptionValue> values_;
  std::vector<std::string> defaults_;
  mutable std::vector<std::string> known_;
};

template <typename T>
std::shared_ptr<T> Options::object(const std::string& key, const std::string& what) {
  const OptionValue* value = take(key);
  if (!value) fail(key, "is required (" + what + ")");
  if (const auto* boxed = std::get_if<std::any>(&value->value)) {
    if (const auto* object = std::any_cast<std::shared_ptr<T>>(boxed)) return *object;
  }
  fail(key, "must be " + what + ", got " + value->show());
}

template <typename T>
T Options::object_value(const std::string& key, const std::string& what) {
  const OptionValue* value = take(key);
  if (!value) fail(key, "is required (" + what + ")");
  if (const auto* boxed = std::get_if<std::any>(&value->value)) {
    if (const auto* object = std::any_cast<T>(boxed)) return *object;
  }
  fail(key, "must be " + what + ", got " + value->show());
}

// The closest of `candidates` to `word` by edit distance, if any is close enough to be a typo.
std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates);

std::string join(const std::vector<std::string>& words, const std::string& separator);

}  // namespace memscript
