-- The plateau curves of README.md: attention's mean accuracy over seeds on each step's fresh
-- training batch, every 200 steps, from results/attention_curves.csv, drawn as one line per
-- (size, width, lr). The runs themselves were on a GPU; the CSV is what came back.
--
--   build/memscript --out experiments/zoology-mqar/results experiments/zoology-mqar/plateau.lua
local csv = ms.param("csv", "experiments/zoology-mqar/results/attention_curves.csv")
local file = assert(io.open(csv, "r"))
local header = file:read("l")
local steps = {}
for column in header:gmatch("[^,]+") do
  if tonumber(column) then steps[#steps + 1] = tonumber(column) end
end

-- One panel per learning rate would hide the point (the lr decides); one per size keeps each
-- size's widths and learning rates side by side.
local panels, sizes = {}, {}
for line in file:lines() do
  local cells = {}
  for cell in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = cell end
  local size, width, lr = cells[1], cells[2], cells[3]
  local x, y = {}, {}
  for i, step in ipairs(steps) do
    local value = tonumber(cells[4 + i])
    if value then x[#x + 1], y[#y + 1] = step, value end
  end
  if not panels[size] then panels[size], sizes[#sizes + 1] = {}, size end
  table.insert(panels[size], { label = "width " .. width .. ", lr " .. lr, x = x, y = y })
end
file:close()

for _, size in ipairs(sizes) do
  local lines = panels[size]
  ms.plot{ file = "plateau_" .. size .. ".svg", lines = lines, y_range = { 0, 1 },
           title = "Zoology MQAR " .. size .. ", attention: batch accuracy (mean of 3 seeds)",
           x_label = "step", y_label = "accuracy" }
  print("plateau_" .. size .. ".svg: " .. #lines .. " curves")
end
