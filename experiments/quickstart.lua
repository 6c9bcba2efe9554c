-- Quickstart: an LSTM decoder learns running bit parity on sequences of length 32 and is
-- evaluated on longer ones (48 to 256) it never saw in training.
--
--   build/memscript experiments/quickstart.lua             (a few seconds on 2 cores)
--   build/memscript --set steps=50 experiments/quickstart.lua
local parity = ms.task.parity{ p_one = 0.5 }

local model = ms.model.decoder{
  mixer = "lstm", layers = 1, d_model = 32, heads = 1, mlp_ratio = 2, task = parity,
}

local run = ms.train{
  model = model, task = parity,
  steps = ms.param("steps", 600), batch = 32, length = 32,
  optimizer = ms.optim.adamw{ lr = ms.param("lr", 3e-3), betas = { 0.9, 0.95 }, weight_decay = 0 },
  eval = { lengths = { 48, 64, 128, 256 }, batches = 8 },
  out = ms.param("out", "quickstart"),
}

print()
print("evaluation accuracy by length (trained at length 32):")
ms.print_scores(run.scores, { "length", "accuracy", "sequence_accuracy" })
if run.out then print("run folder: " .. run.out) end
