#include <cmath>

#include "bindings/convert.h"
#include "bindings/types.h"

namespace memscript::lua {

namespace {

OptionValue read_value(lua_State* L, int index, const std::string& context, const std::string& key);

// A table is a list when its keys are exactly 1..n.
bool is_list(lua_State* L, int index) {
  const lua_Unsigned length = lua_rawlen(L, index);
  lua_Unsigned keys = 0;
  lua_pushnil(L);
  while (lua_next(L, index)) {
    lua_pop(L, 1);
    ++keys;
  }
  return keys == length;
}

std::shared_ptr<OptionList> read_list(lua_State* L, int index, const std::string& context,
                                      const std::string& key) {
  auto list = std::make_shared<OptionList>();
  const lua_Integer length = static_cast<lua_Integer>(lua_rawlen(L, index));
  for (lua_Integer i = 1; i <= length; ++i) {
    lua_rawgeti(L, index, i);
    list->push_back(read_value(L, lua_gettop(L), context, key + "[" + std::to_string(i) + "]"));
    lua_pop(L, 1);
  }
  return list;
}

std::any read_object(lua_State* L, int index, const std::string& context, const std::string& key) {
  if (auto* task = test_object<TaskRef>(L, index)) return *task;
  if (auto* model = test_object<ModelRef>(L, index)) return *model;
  if (auto* optimizer = test_object<OptimizerRef>(L, index)) return *optimizer;
  if (auto* tensor = test_object<torch::Tensor>(L, index)) return *tensor;
  throw UserError(context + ": option '" + key + "' cannot be a " + luaL_typename(L, index));
}

OptionValue read_value(lua_State* L, int index, const std::string& context,
                       const std::string& key) {
  switch (lua_type(L, index)) {
    case LUA_TBOOLEAN:
      return {static_cast<bool>(lua_toboolean(L, index))};
    case LUA_TNUMBER:
      if (lua_isinteger(L, index)) return {static_cast<int64_t>(lua_tointeger(L, index))};
      return {static_cast<double>(lua_tonumber(L, index))};
    case LUA_TSTRING: {
      size_t size = 0;
      const char* text = lua_tolstring(L, index, &size);
      return {std::string(text, size)};
    }
    case LUA_TTABLE:
      if (is_list(L, index)) return {read_list(L, index, context, key)};  // {} is an empty list
      if (lua_rawlen(L, index) > 0) {
        throw UserError(context + ": option '" + key + "' mixes list entries and named entries");
      }
      return {std::make_shared<Options>(read_options(L, index, context + "." + key))};
    case LUA_TUSERDATA:
      return {read_object(L, index, context, key)};
    default:
      throw UserError(context + ": option '" + key + "' cannot be a " + luaL_typename(L, index));
  }
}

}  // namespace

Options read_options(lua_State* L, int index, const std::string& context) {
  index = lua_absindex(L, index);
  if (lua_type(L, index) != LUA_TTABLE) {
    throw UserError(context + " expects an options table, got " + luaL_typename(L, index));
  }
  Options options(context);
  lua_pushnil(L);
  while (lua_next(L, index)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      const std::string shown =
          lua_type(L, -2) == LUA_TNUMBER ? "positional entries" : "non-string keys";
      lua_pop(L, 2);
      throw UserError(context + ": the options table has " + shown + "; use name = value");
    }
    const std::string key = lua_tostring(L, -2);
    options.set(key, read_value(L, lua_gettop(L), context, key));
    lua_pop(L, 1);
  }
  return options;
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
  lua_createtable(L, 0, 10);
  const std::pair<const char*, double> fields[] = {{"accuracy", scores.accuracy},
                                                   {"sequence_accuracy", scores.sequence_accuracy},
                                                   {"precision", scores.precision},
                                                   {"recall", scores.recall},
                                                   {"loss", scores.loss}};
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
