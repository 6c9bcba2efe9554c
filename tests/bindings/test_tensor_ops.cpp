// Tensor arithmetic and autograd in Lua (bindings/lua_tensor_ops.cpp): every op against values
// worked out by hand or by libtorch composed differently, and each refusal naming what was wrong.

#include <catch2/catch.hpp>

#include "harness.h"

using Catch::Matchers::Contains;
using memscript::test::run_lua;

namespace {

// Lua helpers the scripts below share: exact and approximate equality of nested lists.
const char* const kHelpers = R"lua(
  local function same(a, b, tolerance)
    if type(a) ~= type(b) then return false end
    if type(a) == "boolean" then return a == b end
    if type(a) ~= "table" then return math.abs(a - b) <= (tolerance or 0) end
    if #a ~= #b then return false end
    for i = 1, #a do if not same(a[i], b[i], tolerance) then return false end end
    return true
  end
  local function tanh(x) return (math.exp(2 * x) - 1) / (math.exp(2 * x) + 1) end
  local function check(t, expected, tolerance)
    local got = t:tolist()
    assert(same(got, expected, tolerance), "got " .. tostring(t))
  end
)lua";

std::string with_helpers(const std::string& code) { return kHelpers + code; }

}  // namespace

TEST_CASE("tensor operators broadcast, take numbers on either side and follow dtypes") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    local a = ms.tensor{ 1.0, 2.0, 3.0 }
    check(a + 1, { 2, 3, 4 })
    check(1 - a, { 0, -1, -2 })
    check(2 * a, { 2, 4, 6 })
    check(a / 2, { 0.5, 1, 1.5 })
    check(a ^ 2, { 1, 4, 9 })
    check(-a, { -1, -2, -3 })
    local column = ms.tensor{ { 10.0 }, { 20.0 } }
    check(column + a, { { 11, 12, 13 }, { 21, 22, 23 } })
    assert((ms.tensor{ 1, 2 } + 1):dtype() == "int64")
    assert((ms.tensor{ 1, 2 } / 2):dtype() == "float32")
    assert((a + 1.5):dtype() == "float32")
  )lua"));
  CHECK_THAT(run_lua("return ms.tensor{1.0, 2.0, 3.0} + ms.tensor{1.0, 2.0}").error,
             Contains("+: shapes [3] and [2] do not broadcast (dimension -1: 3 against 2)"));
  CHECK_THAT(run_lua("return ms.tensor{1.0} * 'x'").error,
             Contains("*: operand 2 must be a tensor or a number, got string"));
}

TEST_CASE("elementwise functions give their formulas, on floating tensors only") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    local x = ms.tensor{ -1.0, 0.0, 2.0 }:to("float64")
    local e = math.exp
    check(x:exp(), { e(-1), 1, e(2) }, 1e-12)
    check(x:sigmoid(), { 1 / (1 + e(1)), 0.5, 1 / (1 + e(-2)) }, 1e-12)
    check(x:tanh(), { tanh(-1), 0, tanh(2) }, 1e-12)
    check(x:softplus(), { math.log(1 + e(-1)), math.log(2), math.log(1 + e(2)) }, 1e-12)
    check(x:silu(), { -1 / (1 + e(1)), 0, 2 / (1 + e(-2)) }, 1e-12)
    check(x:relu(), { 0, 0, 2 })
    check(x:elu(), { e(-1) - 1, 0, 2 }, 1e-12)
    check(x:abs(), { 1, 0, 2 })
    check((x + 2):sqrt(), { 1, math.sqrt(2), 2 }, 1e-12)
    check((x + 2):log(), { 0, math.log(2), math.log(4) }, 1e-12)
    local g = x:gelu():tolist()  -- x Φ(x): Φ(0) = 1/2, Φ(2) ≈ 0.97725
    assert(g[2] == 0 and math.abs(g[3] - 2 * 0.9772498680518208) < 1e-9)
  )lua"));
  CHECK_THAT(run_lua("return ms.tensor{1, 2}:exp()").error,
             Contains("a floating-point tensor expected, got Long"));
}

TEST_CASE("matmul and einsum contract the dimensions they name") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    local a = ms.tensor{ { 1.0, 2.0 }, { 3.0, 4.0 } }
    local b = ms.tensor{ { 5.0 }, { 6.0 } }
    check(a:matmul(b), { { 17 }, { 39 } })
    check(ms.einsum("ij,jk->ik", a, b), { { 17 }, { 39 } })
    check(ms.einsum("ij->j", a), { 4, 6 })
    local batched = ms.randn({ 3, 2, 4 }, { seed = 1 })
    local w = ms.randn({ 4, 5 }, { seed = 2 })
    assert(batched:matmul(w):shape()[3] == 5)
    check(batched:matmul(w), ms.einsum("bik,kj->bij", batched, w):tolist(), 1e-6)
  )lua"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:matmul(ms.zeros{2, 3})").error,
             Contains("bad argument #1 to 'matmul'") &&
                 Contains("does not chain with [2, 3]: 3 against 2"));
  CHECK_THAT(run_lua("return ms.einsum('ij,jk->ik', ms.zeros{2, 3})").error, Contains("einsum"));
}

TEST_CASE("shape operations count dimensions and positions from 1, and -1 from the end") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    local t = ms.arange(6):reshape{ 2, 3 }
    check(t, { { 0, 1, 2 }, { 3, 4, 5 } })
    check(t:reshape{ -1, 2 }, { { 0, 1 }, { 2, 3 }, { 4, 5 } })
    check(t:transpose(1, 2), { { 0, 3 }, { 1, 4 }, { 2, 5 } })
    check(t:permute{ 2, 1 }, { { 0, 3 }, { 1, 4 }, { 2, 5 } })
    check(t:narrow(2, 2, 2), { { 1, 2 }, { 4, 5 } })
    check(t:select(1, 2), { 3, 4, 5 })
    check(t:select(-1, 1), { 0, 3 })
    check(t:select(2, -1), { 2, 5 })                 -- positions count from the end too
    check(t:narrow(2, -2, 2), { { 1, 2 }, { 4, 5 } })
    assert(t:narrow(2, 4, 0):shape()[2] == 0, "an empty piece at the end")
    local pieces = t:split(2, 2)
    assert(#pieces == 2)
    check(pieces[2], { { 2 }, { 5 } })
    check(ms.cat({ pieces[2], pieces[1] }, 2), { { 2, 0, 1 }, { 5, 3, 4 } })
    assert(#t:unsqueeze(1):shape() == 3 and t:unsqueeze(-1):shape()[3] == 1)
    assert(#t:unsqueeze(1):squeeze(1):shape() == 2)
    check(ms.causal_mask(3), { { true, false, false }, { true, true, false }, { true, true, true } })
    check(ms.arange(2, 5), { 2, 3, 4 })
  )lua"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:reshape{4, 2}").error,
             Contains("shape [4, 2] does not hold the 6 elements of [2, 3]"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:sum(3)").error,
             Contains("dimension 3 does not exist in a tensor of shape [2, 3]"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:narrow(2, 3, 2)").error,
             Contains("positions 3 .. 4 are not inside dimension 2 of size 3"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:permute{1, 1}").error,
             Contains("an order of the dimensions 1 .. 2, each once"));
  CHECK_THAT(run_lua("return ms.cat({ms.zeros{2, 3}, ms.zeros{3, 3}}, 2)").error,
             Contains("entry 2 of shape [3, 3] does not fit [2, 3] but along dimension 2"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:select(1, 0)").error,
             Contains("position 0 is not in 1 .. 2 (or -2 .. -1 from the end)"));
  CHECK_THAT(run_lua("return ms.zeros{2, 3}:narrow(2, -4, 1)").error,
             Contains("positions -4 .. -4 are not inside dimension 2 of size 3"));
}

TEST_CASE("reductions and scans work over one dimension or all of them") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    local t = ms.tensor{ { 1.0, 2.0 }, { 3.0, 4.0 } }:to("float64")
    assert(t:sum():item() == 10 and t:mean():item() == 2.5 and t:amax():item() == 4)
    check(t:sum(1), { 4, 6 })
    check(t:sum(2, true), { { 3 }, { 7 } })
    check(t:mean(-1), { 1.5, 3.5 })
    check(t:amax(1), { 3, 4 })
    check(t:cumsum(2), { { 1, 3 }, { 3, 7 } })
    check(t:cumprod(1), { { 1, 2 }, { 3, 8 } })
    check(t:softmax(2):sum(2), { 1, 1 }, 1e-12)
    check(t:log_softmax(2):exp(), t:softmax(2):tolist(), 1e-12)
    check(t:norm(2), { math.sqrt(5), 5 }, 1e-12)
  )lua"));
}

TEST_CASE("creation: zeros, ones, seeded randn, dtypes and their checks") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    check(ms.zeros{ 2 }, { 0, 0 })
    check(ms.ones({ 2 }, { dtype = "int64" }), { 1, 1 })
    assert(ms.ones({ 1 }, { dtype = "float64" }):dtype() == "float64")
    local a = ms.randn({ 4 }, { seed = 7 })
    check(a, ms.randn({ 4 }, { seed = 7 }):tolist())
    assert(not (a:tolist()[1] == ms.randn({ 4 }, { seed = 8 }):tolist()[1]))
    assert(a:device() == "cpu" and a:to("float64"):dtype() == "float64")
  )lua"));
  CHECK_THAT(run_lua("return ms.zeros{1000000, 1000000}").error,
             Contains("ms.zeros of shape [1000000, 1000000] would need at least"));
  CHECK_THAT(run_lua("return ms.zeros({2}, {dtype = 'float16'})").error,
             Contains("unknown dtype 'float16'"));
  CHECK_THAT(run_lua("return ms.zeros({2}, {dtype = 'int64', requires_grad = true})").error,
             Contains("only floating tensors take gradients"));
  CHECK_THAT(run_lua("return ms.zeros{2, -1}").error, Contains("size -1 at entry 2 is negative"));
  CHECK_THAT(run_lua("return ms.ones({2}, {colour = 1})").error,
             Contains("unknown option 'colour'"));
}

TEST_CASE("gradients flow through the ops back to tensors marked requires_grad") {
  REQUIRE_LUA_OK(with_helpers(R"lua(
    local x = ms.tensor{ 0.5, -1.0, 2.0 }:to("float64"):requires_grad()
    local w = ms.tensor{ { 1.0, 2.0 }, { 3.0, 4.0 }, { 5.0, 6.0 } }:to("float64"):requires_grad()
    -- y = Σ_j tanh((x W)_j) + Σ_i x_i²
    local y = (x:unsqueeze(1):matmul(w)):tanh():sum() + (x * x):sum()
    y:backward()
    local xw = x:detach():unsqueeze(1):matmul(w:detach()):select(1, 1):tolist()
    local slope = { 1 - tanh(xw[1]) ^ 2, 1 - tanh(xw[2]) ^ 2 }
    local xs, ws = x:detach():tolist(), w:detach():tolist()
    local gx, gw = x:grad():tolist(), w:grad():tolist()
    for i = 1, 3 do
      local expected = ws[i][1] * slope[1] + ws[i][2] * slope[2] + 2 * xs[i]
      assert(math.abs(gx[i] - expected) < 1e-12, "dy/dx" .. i)
      for j = 1, 2 do assert(math.abs(gw[i][j] - xs[i] * slope[j]) < 1e-12, "dy/dw") end
    end
    assert(ms.zeros{ 2 }:grad() == nil)
  )lua"));
  CHECK_THAT(run_lua("local x = ms.zeros{2}:requires_grad(); return (x * 2):requires_grad()").error,
             Contains("a tensor computed from others"));
  CHECK_THAT(run_lua("local x = ms.zeros{2}:requires_grad(); (x * 2):sum():backward(); "
                     "return (-x):grad()")
                 .error,
             Contains("a tensor computed from others keeps no gradient: only leaves made with "
                      ":requires_grad() do"));
  CHECK_THAT(run_lua("return ms.zeros{2}:requires_grad():backward()").error,
             Contains("backward() needs a scalar"));
}

TEST_CASE("maximum, minimum, where, clamp, logsigmoid and cummax give their formulas") {
  REQUIRE_LUA_OK(R"lua(
    local a, b = ms.tensor{ 1.0, -2.0, 3.0 }, ms.tensor{ 0.5, 4.0, 3.0 }
    local function same(t, list)
      for i, v in ipairs(t:tolist()) do
        if math.abs(v - list[i]) > 1e-6 then return false end
      end
      return #t:tolist() == #list
    end
    assert(same(ms.maximum(a, b), { 1, 4, 3 }) and same(ms.minimum(a, b), { 0.5, -2, 3 }))
    assert(same(ms.maximum(a, 0), { 1, 0, 3 }), "a number broadcasts")
    assert(ms.maximum(a, 0):dtype() == "float32", "and takes the tensor's dtype")
    assert(same(ms.maximum(0, a), { 1, 0, 3 }) and ms.maximum(0, a):dtype() == "float32",
           "on either side, as in the operators")
    assert(same(ms.where(a:eq(3), 0.5, ms.tensor{ 7, 8, 9 }), { 7, 8, 0.5 }),
           "a number is not cut to the other side's integer dtype")
    assert(same(ms.where(a:eq(3), a, b), { 0.5, 4, 3 }) and same(ms.where(a:eq(1), 0, b), { 0, 4, 3 }))
    assert(same(a:clamp(0, 2), { 1, 0, 2 }) and same(a:clamp(nil, 0), { 0, -2, 0 }))
    local x = ms.tensor{ -30.0, 0.0, 2.0 }:to("float64")
    for i, v in ipairs(x:logsigmoid():tolist()) do
      local z = x:tolist()[i]
      assert(math.abs(v - (-math.log(1 + math.exp(-z)))) < 1e-12, "logsigmoid")
    end
    assert(same(ms.tensor{ 1.0, 3.0, 2.0, 5.0 }:cummax(1), { 1, 3, 3, 5 }), "cummax")
  )lua");
  CHECK_THAT(run_lua("ms.maximum(ms.zeros{2}, ms.zeros{3})").error,
             Contains("ms.maximum: shapes [2] and [3] do not broadcast"));
  CHECK_THAT(run_lua("ms.where(ms.zeros{2}, 1, 2)").error,
             Contains("bad argument #1 to 'where' (a bool tensor expected, got float32)"));
  CHECK_THAT(run_lua("ms.zeros{2}:clamp(1, 0)").error, Contains("a max below the min"));
  CHECK_THAT(run_lua("ms.zeros{2}:clamp()").error, Contains("at least one bound expected"));
}

TEST_CASE("expand, index and gather take 0-based index tensors and name what they refuse") {
  REQUIRE_LUA_OK(R"lua(
    local t = ms.tensor{ { 1, 2, 3 }, { 4, 5, 6 } }
    local e = ms.tensor{ { 7 }, { 8 } }:expand{ 3, -1, 4 }
    assert(e:shape()[1] == 3 and e:shape()[2] == 2 and e:shape()[3] == 4)
    assert(e:tolist()[3][2][4] == 8, "a size 1 repeats")
    local picked = t:index(2, ms.tensor{ 2, 0 })
    assert(picked:tolist()[1][1] == 3 and picked:tolist()[2][2] == 4, "index_select")
    local g = t:gather(2, ms.tensor{ { 0, 0 }, { 2, 1 } })
    assert(g:tolist()[1][2] == 1 and g:tolist()[2][1] == 6 and g:tolist()[2][2] == 5, "gather")
    -- Gradients reach the gathered entries only.
    local w = ms.tensor{ 1.0, 2.0, 3.0 }:to("float64"):requires_grad()
    w:index(1, ms.tensor{ 2, 2 }):sum():backward()
    assert(w:grad():tolist()[1] == 0 and w:grad():tolist()[3] == 2)
  )lua");
  CHECK_THAT(run_lua("ms.zeros{2, 3}:expand{ 2, 4 }").error,
             Contains("sizes [2, 4] are not a broadcast of [2, 3]"));
  CHECK_THAT(run_lua("ms.zeros{2, 3}:index(2, ms.tensor{ 3 })").error,
             Contains("index 3 is outside 0 .. 2 (dimension 2 of [2, 3]; indices are 0-based"));
  CHECK_THAT(run_lua("ms.zeros{2, 3}:index(1, ms.zeros{1})").error,
             Contains("an int64 tensor of indices expected, got float32"));
  CHECK_THAT(run_lua("ms.zeros{2, 3}:gather(2, ms.tensor{ 0 })").error,
             Contains("indices of 2 dimensions, no larger than [2, 3]"));
}
