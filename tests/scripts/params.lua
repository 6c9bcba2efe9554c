-- Prints each parameter with its Lua type, for the --set tests.
local function show(name, value) print(name, value, math.type(value) or type(value)) end
show("steps", ms.param("steps", 100))
show("lr", ms.param("lr", 0.5))
show("flag", ms.param("flag", false))
show("name", ms.param("name", "x"))
show("sizes", table.concat(ms.param("sizes", { 16 }), "+"))
