-- A module next to a test script, found by `require` from the script's own folder.
local M = {}
function M.double(x) return 2 * x end
return M
