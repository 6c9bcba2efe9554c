-- A tiny training run for the CLI tests of ms.train, --resume and --replay; --set changes it.
-- marker_at > 0: at that step, write <out root>/marker and from then on spend `slow` seconds
-- per step (slow_marker.lua), so that a test can signal or kill the process mid-run.
local parity = ms.task.parity{ ones = { min = 1, max = 6 } }
local model = ms.model.decoder{
  mixer = ms.param("mixer", "lstm"), layers = 1, d_model = ms.param("d_model", 8),
  heads = ms.param("heads", 1), norm = ms.param("norm", "layer"), mlp = ms.param("mlp", "gelu"),
  task = parity,
}
local marker_at, slow = ms.param("marker_at", 0), ms.param("slow", 0.0)

local on_step = require("slow_marker")(marker_at, slow)

local run = ms.train{
  model = model, task = parity, steps = ms.param("steps", 30), batch = ms.param("batch", 8),
  length = 8,
  optimizer = ms.optim[ms.param("optim", "adamw")]{ lr = ms.param("lr", 3e-3), warmup = 3,
                                                     decay = "cosine" },
  eval = { lengths = { 12, 16 }, batches = 2, batch = 8, every = ms.param("eval_every", 10) },
  log_every = ms.param("log_every", 1), checkpoint_every = ms.param("checkpoint_every", 5),
  clip = 1.0, on_step = on_step, out = "train",
}
print("steps", run.steps)
