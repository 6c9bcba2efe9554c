#include <cmath>

#include "bindings/convert.h"
#include "bindings/types.h"

namespace memscript::lua {

namespace {

// Option tables nest a few levels (ms.train{ eval = { lengths = { ... } } }); far deeper is a
// mistake, and each level takes Lua stack slots.
constexpr int kMaxOptionDepth = 16;

// Reads one options table, with the tables being read on the way to it: a table that
// contains itself is an error, not an endless recursion.
class OptionReader {
 public:
  explicit OptionReader(lua_State* L) : L_(L) {}

  Options table(int index, const std::string& context) {
    index = lua_absindex(L_, index);
    if (lua_type(L_, index) != LUA_TTABLE) {
      throw UserError(context + " expects an options table, got " + luaL_typename(L_, index));
    }
    if (!lua_checkstack(L_, 8)) throw UserError(context + ": out of Lua stack space");
    open_.push_back(lua_topointer(L_, index));
    Options options = entries(index, context);
    open_.pop_back();
    return options;
  }

 private:
  Options entries(int index, const std::string& context) {
    Options options(context);
    lua_pushnil(L_);
    while (lua_next(L_, index)) {
      if (lua_type(L_, -2) != LUA_TSTRING) {
        const std::string shown =
            lua_type(L_, -2) == LUA_TNUMBER ? "positional entries" : "non-string keys";
        lua_pop(L_, 2);
        throw UserError(context + ": the options table has " + shown + "; use name = value");
      }
      size_t size = 0;
      const char* text = lua_tolstring(L_, -2, &size);
      const std::string key(text, size);
      options.set(key, value(lua_gettop(L_), context, key));
      lua_pop(L_, 1);
    }
    return options;
  }

  // Before reading the nested table at `index` (option `key`): refuses a cycle and too deep a
  // nesting, and makes room on the Lua stack for the level.
  void enter(int index, const std::string& context, const std::string& key) {
    const void* table = lua_topointer(L_, index);
    for (const void* open : open_) {
      if (open == table) {
        throw UserError(context + ": option '" + key +
                        "' contains itself (a table that holds itself cannot be read as options)");
      }
    }
    if (static_cast<int>(open_.size()) >= kMaxOptionDepth) {
      throw UserError(context + ": option '" + key + "' nests tables more than " +
                      std::to_string(kMaxOptionDepth) + " deep");
    }
    if (!lua_checkstack(L_, 8)) throw UserError(context + ": out of Lua stack space");
    open_.push_back(table);
  }

  // A table is a list when its keys are exactly 1..n.
  bool is_list(int index) {
    const lua_Unsigned length = lua_rawlen(L_, index);
    lua_Unsigned keys = 0;
    lua_pushnil(L_);
    while (lua_next(L_, index)) {
      lua_pop(L_, 1);
      ++keys;
    }
    return keys == length;
  }

  std::shared_ptr<OptionList> list(int index, const std::string& context, const std::string& key) {
    auto items = std::make_shared<OptionList>();
    const lua_Integer length = static_cast<lua_Integer>(lua_rawlen(L_, index));
    for (lua_Integer i = 1; i <= length; ++i) {
      lua_rawgeti(L_, index, i);
      items->push_back(value(lua_gettop(L_), context, key + "[" + std::to_string(i) + "]"));
      lua_pop(L_, 1);
    }
    return items;
  }

  OptionValue nested(int index, const std::string& context, const std::string& key) {
    enter(index, context, key);
    OptionValue result;
    if (is_list(index)) {
      result = {list(index, context, key)};  // {} is an empty list
    } else if (lua_rawlen(L_, index) > 0) {
      throw UserError(context + ": option '" + key + "' mixes list entries and named entries");
    } else {
      result = {std::make_shared<Options>(entries(index, context + "." + key))};
    }
    open_.pop_back();
    return result;
  }

  std::any object(int index, const std::string& context, const std::string& key) {
    if (auto* task = test_object<TaskRef>(L_, index)) return *task;
    if (auto* model = test_object<ModelRef>(L_, index)) return *model;
    if (auto* optimizer = test_object<OptimizerRef>(L_, index)) return *optimizer;
    if (auto* tensor = test_object<torch::Tensor>(L_, index)) return *tensor;
    throw UserError(context + ": option '" + key + "' cannot be a " + luaL_typename(L_, index));
  }

  OptionValue value(int index, const std::string& context, const std::string& key) {
    switch (lua_type(L_, index)) {
      case LUA_TBOOLEAN:
        return {static_cast<bool>(lua_toboolean(L_, index))};
      case LUA_TNUMBER:
        if (lua_isinteger(L_, index)) return {static_cast<int64_t>(lua_tointeger(L_, index))};
        return {static_cast<double>(lua_tonumber(L_, index))};
      case LUA_TSTRING: {
        size_t size = 0;
        const char* text = lua_tolstring(L_, index, &size);
        return {std::string(text, size)};
      }
      case LUA_TTABLE:
        return nested(index, context, key);
      case LUA_TUSERDATA:
        return {object(index, context, key)};
      default:
        throw UserError(context + ": option '" + key + "' cannot be a " + luaL_typename(L_, index));
    }
  }

  lua_State* L_;
  std::vector<const void*> open_;  // the tables being read, outermost first
};

}  // namespace

Options read_options(lua_State* L, int index, const std::string& context) {
  return OptionReader(L).table(index, context);
}

Options read_optional_options(lua_State* L, int index, const std::string& context) {
  if (lua_isnoneornil(L, index)) return Options(context);
  return read_options(L, index, context);
}

void push_json(lua_State* L, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::boolean:
      lua_pushboolean(L, value.get<bool>());
      return;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      lua_pushinteger(L, value.get<lua_Integer>());
      return;
    case nlohmann::json::value_t::number_float:
      lua_pushnumber(L, value.get<double>());
      return;
    case nlohmann::json::value_t::string: {
      const auto& text = value.get_ref<const std::string&>();
      lua_pushlstring(L, text.data(), text.size());
      return;
    }
    case nlohmann::json::value_t::array: {
      lua_createtable(L, static_cast<int>(value.size()), 0);
      lua_Integer i = 0;
      for (const auto& item : value) {
        push_json(L, item);
        lua_rawseti(L, -2, ++i);
      }
      return;
    }
    case nlohmann::json::value_t::object: {
      lua_createtable(L, 0, static_cast<int>(value.size()));
      for (const auto& [key, item] : value.items()) {
        lua_pushlstring(L, key.data(), key.size());
        push_json(L, item);
        lua_rawset(L, -3);
      }
      return;
    }
    default:
      lua_pushnil(L);
  }
}

void push_scores(lua_State* L, const LengthScores& scores) {
  lua_createtable(L, 0, 11);
  const std::pair<const char*, double> fields[] = {
      {"accuracy", scores.accuracy},   {"sequence_accuracy", scores.sequence_accuracy},
      {"precision", scores.precision}, {"recall", scores.recall},
      {"loss", scores.loss},           {"scaled_accuracy", scores.scaled_accuracy}};
  for (const auto& [name, number] : fields) {
    lua_pushnumber(L, number);
    lua_setfield(L, -2, name);
  }
  lua_pushinteger(L, scores.length);
  lua_setfield(L, -2, "length");
  lua_pushinteger(L, scores.scored);
  lua_setfield(L, -2, "scored");
  lua_pushinteger(L, scores.sequences);
  lua_setfield(L, -2, "sequences");
  lua_createtable(L, static_cast<int>(scores.accuracy_by_position.size()), 0);
  for (size_t t = 0; t < scores.accuracy_by_position.size(); ++t) {
    lua_pushnumber(L, scores.accuracy_by_position[t]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(t + 1));
  }
  lua_setfield(L, -2, "by_position");
}

}  // namespace memscript::lua
