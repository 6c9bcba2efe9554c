#include "runtime/options.h"

#include <algorithm>
#include <sstream>

namespace memscript {

namespace {

std::string format_number(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

std::string show_integer_range(IntRange range) {
  if (range.max == INT64_MAX) return ">= " + std::to_string(range.min);
  if (range.min == INT64_MIN) return "<= " + std::to_string(range.max);
  return "in [" + std::to_string(range.min) + ", " + std::to_string(range.max) + "]";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string OptionValue::type_name() const {
  struct Visitor {
    std::string operator()(bool) const { return "boolean"; }
    std::string operator()(int64_t) const { return "integer"; }
    std::string operator()(double) const { return "number"; }
    std::string operator()(const std::string&) const { return "string"; }
    std::string operator()(const std::shared_ptr<Options>&) const { return "table"; }
    std::string operator()(const std::shared_ptr<OptionList>&) const { return "list"; }
    std::string operator()(const std::any&) const { return "object"; }
  };
  return std::visit(Visitor{}, value);
}

std::string OptionValue::show() const {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_number(v); }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const std::shared_ptr<Options>&) const { return "a table"; }
    std::string operator()(const std::shared_ptr<OptionList>& list) const {
      std::string out = "{";
      for (size_t i = 0; i < list->size(); ++i) out += (i ? ", " : "") + (*list)[i].show();
      return out + "}";
    }
    std::string operator()(const std::any&) const { return "an object"; }
  };
  return std::visit(Visitor{}, value);
}

Options::Options(std::string context) : context_(std::move(context)) {}

void Options::set(const std::string& key, OptionValue value) { values_[key] = std::move(value); }

void Options::set_default(const std::string& key, OptionValue value) {
  if (values_.count(key)) return;
  values_[key] = std::move(value);
  defaults_.push_back(key);
}

bool Options::has(const std::string& key) const { return values_.count(key) > 0; }

const OptionValue* Options::take(const std::string& key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
  auto found = values_.find(key);
  return found == values_.end() ? nullptr : &found->second;
}

const OptionValue* Options::raw(const std::string& key) { return take(key); }

void Options::fail(const std::string& key, const std::string& message) const {
  throw UserError(context_ + ": option '" + key + "' " + message);
}

std::optional<int64_t> OptionValue::whole_number() const {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* d = std::get_if<double>(&value);
      d && std::floor(*d) == *d && std::abs(*d) < 9.0e15)
    return static_cast<int64_t>(*d);
  return std::nullopt;
}

std::optional<int64_t> Options::optional_integer(const std::string& key, IntRange range) {
  const OptionValue* value = take(key);
  if (!value) return std::nullopt;
  const std::optional<int64_t> whole = value->whole_number();
  if (!whole) fail(key, "must be an integer, got " + value->show());
  const int64_t result = *whole;
  if (result < range.min || result > range.max)
    fail(key, "must be " + show_integer_range(range) + ", got " + std::to_string(result));
  return result;
}

int64_t Options::integer(const std::string& key, int64_t fallback, IntRange range) {
  return optional_integer(key, range).value_or(fallback);
}

double Options::number(const std::string& key, double fallback, double min, double max) {
  const OptionValue* value = take(key);
  if (!value) return fallback;
  double result = 0;
  if (const auto* i = std::get_if<int64_t>(&value->value)) {
    result = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&value->value)) {
    result = *d;
  } else {
    fail(key, "must be a number, got " + value->show());
  }
  if (!(result >= min && result <= max))
    fail(key, "must be in [" + format_number(min) + ", " + format_number(max) + "], got " +
                  format_number(result));
  return result;
}

bool Options::boolean(const std::string& key, bool fallback) {
  const OptionValue* value = take(key);
  if (!value) return fallback;
  if (const auto* b = std::get_if<bool>(&value->value)) return *b;
  fail(key, "must be true or false, got " + value->show());
}

std::optional<std::string> Options::optional_string(const std::string& key) {
  const OptionValue* value = take(key);
  if (!value) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&value->value)) return *s;
  fail(key, "must be a string, got " + value->show());
}

std::string Options::string(const std::string& key, const std::string& fallback,
                            const std::vector<std::string>& choices) {
  std::string result = optional_string(key).value_or(fallback);
  if (!choices.empty() && std::find(choices.begin(), choices.end(), result) == choices.end())
    fail(key, "must be one of " + join(choices, ", ") + ", got \"" + result + "\"");
  return result;
}

// Each item of the list at `key` as a one-key Options, so items get the same checks and
// messages as single values. Null when the key is absent.
std::optional<std::vector<Options>> Options::items(const std::string& key, const char* what) {
  const OptionValue* value = take(key);
  if (!value) return std::nullopt;
  const auto* list = std::get_if<std::shared_ptr<OptionList>>(&value->value);
  if (!list) fail(key, std::string("must be a list of ") + what + ", got " + value->show());
  std::vector<Options> result;
  for (const OptionValue& item : **list) {
    result.emplace_back(context_);
    result.back().set(key, item);
  }
  return result;
}

std::vector<int64_t> Options::integers(const std::string& key, const std::vector<int64_t>& fallback,
                                       IntRange range) {
  const auto list = items(key, "integers");
  if (!list) return fallback;
  std::vector<int64_t> result;
  for (Options item : *list) result.push_back(*item.optional_integer(key, range));
  return result;
}

std::vector<double> Options::numbers(const std::string& key, const std::vector<double>& fallback) {
  const auto list = items(key, "numbers");
  if (!list) return fallback;
  std::vector<double> result;
  for (Options item : *list) result.push_back(item.number(key, 0));
  return result;
}

Options Options::table(const std::string& key) {
  const OptionValue* value = take(key);
  if (!value) return Options(context_ + "." + key);
  if (const auto* table = std::get_if<std::shared_ptr<Options>>(&value->value)) {
    Options nested = **table;
    nested.context_ = context_ + "." + key;
    return nested;
  }
  const auto* list = std::get_if<std::shared_ptr<OptionList>>(&value->value);
  if (list && (*list)->empty()) return Options(context_ + "." + key);  // {} reads as either
  fail(key, "must be a table, got " + value->show());
}

void Options::finish() const {
  for (const auto& [key, value] : values_) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    if (std::find(defaults_.begin(), defaults_.end(), key) != defaults_.end()) continue;
    std::vector<std::string> valid = known_;
    std::sort(valid.begin(), valid.end());
    std::string hint;
    if (auto guess = closest_match(key, valid)) hint = " (did you mean '" + *guess + "'?)";
    throw UserError(context_ + ": unknown option '" + key + "' = " + value.show() + hint +
                    "; valid options: " + join(valid, ", "));
  }
}

std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? separator : "") + words[i];
  return out;
}

}  // namespace memscript
