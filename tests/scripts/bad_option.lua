local parity = ms.task.parity{}
local model = ms.model.decoder{ mixer = "lstm", d_model = 8, heads = 1, layers = 1, task = parity }
ms.train{ model = model, task = parity, stpes = 10 }
