// ms.task.define: a task written in the script, usable wherever a built-in task is (ms.train,
// ms.evaluate, task:sample, task:show, sweeps and reports).
//
//   local task = ms.task.define{
//     name = "my_parity", vocab = 2, classes = 2,   -- tokens 0..vocab−1, labels 0..classes−1
//     score = "all",                                -- or "last": the final position only
//     sample = function(rng, length)                -- one sequence
//       ... return inputs, targets, mask            -- lists of `length` (mask: booleans; nil:
//     end,                                          -- every position scored)
//   }
//
// Every sequence is drawn from its own generator seeded by (seed, index), as the built-ins'
// are: `rng` is that generator (rng:int(n) in [0, n), rng:between(lo, hi), rng:uniform(),
// rng:bernoulli(p), rng:ints(n, count)), valid during the call only. ms.task.define samples
// once at once, so a sample function that breaks these rules fails at its own line before any
// training.

#include <lua.hpp>

#include <algorithm>
#include <cmath>

#include "bindings/lua_ref.h"
#include "bindings/types.h"

namespace memscript::lua {

namespace {

constexpr const char* kDefineName = "ms.task.define";

[[noreturn]] void refuse(const std::string& why) {
  throw UserError(std::string(kDefineName) + ": " + why);
}

// The generator of the sequence being drawn; null between calls.
struct RngHandle {
  Rng* rng = nullptr;
};

}  // namespace

template <>
constexpr const char* kTypeName<RngHandle> = "memscript.Rng";

namespace {

Rng& live_rng(lua_State* L) {
  RngHandle& handle = check_object<RngHandle>(L, 1);
  if (!handle.rng)
    throw UserError("rng: a task's generator is valid only inside its sample function");
  return *handle.rng;
}

// rng:int(n): uniform in [0, n).
int rng_int(lua_State* L) {
  Rng& rng = live_rng(L);
  const int64_t n = positive_integer_arg(L, 2, "the bound");
  lua_pushinteger(L, static_cast<lua_Integer>(rng.below(static_cast<uint64_t>(n))));
  return 1;
}

// rng:ints(n, count): a list of `count` draws in [0, n).
int rng_ints(lua_State* L) {
  Rng& rng = live_rng(L);
  const int64_t n = positive_integer_arg(L, 2, "the bound");
  const int64_t count = positive_integer_arg(L, 3, "the count");
  if (count > (int64_t{1} << 26)) argument_error(L, 3, "at most 2^26 draws at once");
  lua_createtable(L, static_cast<int>(count), 0);
  for (int64_t i = 1; i <= count; ++i) {
    lua_pushinteger(L, static_cast<lua_Integer>(rng.below(static_cast<uint64_t>(n))));
    lua_rawseti(L, -2, i);
  }
  return 1;
}

// rng:between(lo, hi): uniform in [lo, hi], both included.
int rng_between(lua_State* L) {
  Rng& rng = live_rng(L);
  if (!lua_isinteger(L, 2)) argument_error(L, 2, "integer expected (the low end)");
  if (!lua_isinteger(L, 3)) argument_error(L, 3, "integer expected (the high end)");
  const int64_t lo = lua_tointeger(L, 2), hi = lua_tointeger(L, 3);
  if (lo > hi) argument_error(L, 3, "must be >= the low end");
  lua_pushinteger(L, static_cast<lua_Integer>(rng.between(lo, hi)));
  return 1;
}

int rng_uniform(lua_State* L) {
  lua_pushnumber(L, live_rng(L).uniform());
  return 1;
}

int rng_bernoulli(lua_State* L) {
  Rng& rng = live_rng(L);
  const double p = lua_tonumber(L, 2);
  if (lua_type(L, 2) != LUA_TNUMBER || !(p >= 0 && p <= 1))
    argument_error(L, 2, "a probability in [0, 1] expected");
  lua_pushboolean(L, rng.bernoulli(p));
  return 1;
}

const luaL_Reg kRngMethods[] = {{"int", protect<rng_int>},
                                {"ints", protect<rng_ints>},
                                {"between", protect<rng_between>},
                                {"uniform", protect<rng_uniform>},
                                {"bernoulli", protect<rng_bernoulli>},
                                {nullptr, nullptr}};

class ScriptTask : public Task {
 public:
  ScriptTask(lua_State* L, std::string name, int64_t vocab, int64_t classes, int sample_index)
      : L_(L),
        name_(std::move(name)),
        vocab_(vocab),
        classes_(classes),
        sample_(std::make_unique<LuaRef>(L, sample_index)),
        defined_at_(defined_at(L, sample_index)) {
    push_object<RngHandle>(L, {});
    rng_ = std::make_unique<LuaRef>(L, -1);
    lua_pop(L, 1);
  }

  std::string name() const override { return name_; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t num_classes() const override { return classes_; }
  nlohmann::json config() const override {
    return {
        {"task", name_}, {"vocab", vocab_}, {"classes", classes_}, {"defined", "in the script"}};
  }

  void generate(Rng& rng, SequenceView sequence) const override {
    StackGuard guard(L_);
    sample_->push();
    rng_->push();
    RngHandle& handle = *test_object<RngHandle>(L_, -1);
    handle.rng = &rng;
    lua_pushinteger(L_, sequence.length);
    try {
      call_lua(L_, 2, 3);
    } catch (...) {
      handle.rng = nullptr;
      throw;
    }
    handle.rng = nullptr;
    read_tokens(-3, "inputs", vocab_, sequence.length, sequence.inputs);
    read_tokens(-2, "targets", classes_, sequence.length, sequence.targets);
    read_mask(-1, sequence.length, sequence.mask);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw UserError(defined_at_ + ": task '" + name_ + "': " + message);
  }

  int64_t checked_length(int index, const char* what, int64_t length) const {
    if (!lua_istable(L_, index))
      fail(std::string("sample must return ") + what + " as a list, got " +
           luaL_typename(L_, index));
    const auto count = static_cast<int64_t>(lua_rawlen(L_, index));
    if (count != length)
      fail(std::string("sample returned ") + std::to_string(count) + " " + what + " for length " +
           std::to_string(length));
    return count;
  }

  void read_tokens(int index, const char* what, int64_t bound, int64_t length, int64_t* out) const {
    const int table = lua_absindex(L_, index);
    checked_length(table, what, length);
    for (int64_t t = 0; t < length; ++t) {
      lua_rawgeti(L_, table, t + 1);
      int is_integer = 0;
      const lua_Integer value = lua_tointegerx(L_, -1, &is_integer);
      lua_pop(L_, 1);
      if (!is_integer || value < 0 || value >= bound)
        fail(std::string(what) + "[" + std::to_string(t + 1) + "] must be an integer in [0, " +
             std::to_string(bound) + ")" + (is_integer ? ", got " + std::to_string(value) : ""));
      out[t] = value;
    }
  }

  void read_mask(int index, int64_t length, bool* out) const {
    const int table = lua_absindex(L_, index);
    if (lua_isnil(L_, table)) {
      std::fill(out, out + length, true);
      return;
    }
    checked_length(table, "mask entries", length);
    for (int64_t t = 0; t < length; ++t) {
      lua_rawgeti(L_, table, t + 1);
      if (!lua_isboolean(L_, -1)) fail("mask[" + std::to_string(t + 1) + "] must be true or false");
      out[t] = lua_toboolean(L_, -1);
      lua_pop(L_, 1);
    }
  }

  lua_State* L_;
  std::string name_;
  int64_t vocab_, classes_;
  std::unique_ptr<LuaRef> sample_;
  std::unique_ptr<LuaRef> rng_;
  std::string defined_at_;
};

int64_t count_field(lua_State* L, const char* key) {
  raw_field(L, 1, key);
  if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > (1 << 30))
    refuse(std::string(key) + " must be a positive integer");
  const int64_t value = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return value;
}

}  // namespace

int define_task_binding(lua_State* L) {
  if (!lua_istable(L, 1))
    argument_error(L, 1, "table expected ({ name =, vocab =, classes =, sample = })");
  lua_settop(L, 1);
  check_keys(L, 1, {"name", "vocab", "classes", "sample", "score"}, kDefineName);
  raw_field(L, 1, "name");
  if (lua_type(L, -1) != LUA_TSTRING) refuse("name must be a string");
  const std::string name = lua_tostring(L, -1);
  const std::vector<std::string> builtins = task_names();
  if (std::find(builtins.begin(), builtins.end(), name) != builtins.end())
    refuse("'" + name + "' is a built-in task's name");
  const int64_t vocab = count_field(L, "vocab");
  const int64_t classes = count_field(L, "classes");
  raw_field(L, 1, "score");
  const std::string score = lua_isnil(L, -1)      ? "all"
                            : lua_isstring(L, -1) ? lua_tostring(L, -1)
                                                  : "";
  if (score != "all" && score != "last") refuse("score must be \"all\" or \"last\"");
  raw_field(L, 1, "sample");
  if (!lua_isfunction(L, -1)) refuse("sample must be a function");
  TaskRef task = std::make_shared<ScriptTask>(L, name, vocab, classes, lua_gettop(L));
  if (score == "last") task = score_last_only(std::move(task));
  // One batch at once: a sample function that breaks its promises fails here, at its line.
  sample_host_batch(*task, 2, {4, 4}, 0);
  push_object<TaskRef>(L, std::move(task));
  return 1;
}

void register_rng_type(lua_State* L) { register_type<RngHandle>(L, kRngMethods); }

}  // namespace memscript::lua
