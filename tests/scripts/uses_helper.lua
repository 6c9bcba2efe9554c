local helper = require "helper_module"
assert(helper.double(21) == 42)
assert(require("memscript") == ms)
