-- A few steps through every layer, for end-to-end tests.
local parity = ms.task.parity{ ones = { min = 1, max = 4 } }
local model = ms.model.decoder{ mixer = "lstm", layers = 1, d_model = 8, heads = 1, task = parity }
local run = ms.train{
  model = model, task = parity, steps = ms.param("steps", 5), batch = 4, length = 8,
  optimizer = ms.optim.adamw{ lr = 1e-3 }, eval = { lengths = { 12 }, batches = 1, batch = 4 },
  out = "tiny",
}
print("steps", run.steps)
print("accuracy@12", run.scores[12].accuracy)
