-- The memscript module: the bound API (memscript.core, written in C++) plus helpers written
-- in Lua on top of it. Preloaded as the global `ms`.
local ms = require "memscript.core"
require "memscript.sweep"(ms)

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

--- The keys of t, sorted (strings, or numbers; not a mix): a table's names as a list, such as
--- the choices of ms.param.
function ms.keys(t)
  if type(t) ~= "table" then
    error("bad argument #1 to 'keys' (table expected, got " .. type(t) .. ")", 2)
  end
  return sorted_keys(t)
end

local function cell(value)
  if type(value) == "number" and math.type(value) == "float" then
    return value ~= value and "-" or string.format("%.4f", value)
  end
  return tostring(value)
end

--- Formats rows (a list of tables) as an aligned text table with the given columns.
function ms.format_table(rows, columns)
  local widths, lines = {}, {}
  for i, column in ipairs(columns) do
    widths[i] = #column
    for _, row in ipairs(rows) do widths[i] = math.max(widths[i], #cell(row[column])) end
  end
  local function line(values)
    local parts = {}
    for i, value in ipairs(values) do parts[i] = string.rep(" ", widths[i] - #value) .. value end
    return table.concat(parts, "  ")
  end
  lines[1] = line(columns)
  for _, row in ipairs(rows) do
    local values = {}
    for i, column in ipairs(columns) do values[i] = cell(row[column]) end
    lines[#lines + 1] = line(values)
  end
  return table.concat(lines, "\n")
end

--- Formats evaluation scores ({[length] = scores}, as ms.evaluate and ms.train return them)
--- as one row per length.
function ms.format_scores(scores, columns)
  columns = columns or { "length", "accuracy", "sequence_accuracy", "recall", "loss" }
  local rows = {}
  for _, length in ipairs(sorted_keys(scores)) do rows[#rows + 1] = scores[length] end
  return ms.format_table(rows, columns)
end

function ms.print_scores(scores, columns)
  print(ms.format_scores(scores, columns))
end

return ms
