#!/usr/bin/env python3
"""Loads a memscript model into the PyTorch decoder of pytorch_reference.py and compares outputs.

    python pytorch_crosscheck.py MODEL.safetensors BATCH.safetensors

MODEL.safetensors is what memscript's m:save_safetensors(path) writes: the parameters under
memscript's names, with the model's config (DecoderImpl::config()) in the metadata key
"memscript.config". BATCH.safetensors holds `tokens` (int64 [batch, length]) and `logits`
(memscript's output for them). The script builds pytorch_reference.Decoder from the config,
loads the parameters with load_state_dict (every name must match, in both directions), runs
the tokens, and prints one line:

    crosscheck: <mixers> <dtype> max relative error <e>

When BATCH.safetensors also holds `train_tokens`, `train_targets`, `train_mask` ([steps, batch,
length]) and `train_losses` ([steps]: memscript's masked cross-entropy at each step, before
that step's update), it then trains from the same weights with torch.optim.Adam (lr 1e-3,
betas (0.9, 0.999), eps 1e-8, no weight decay: memscript's ms.optim.adam{ weight_decay = 0 })
on those batches and prints

    crosscheck: <mixers> <dtype> <steps> Adam steps, max relative loss error <e>

Exit codes: 0 when the error is at most --tolerance (default 1e-9 for float64, 1e-4 for
float32), 1 when larger, 2 for an unreadable file or a model the reference cannot build,
77 when torch cannot be imported.

This is also how a user loads a memscript model in Python: the file is plain safetensors
(safetensors.torch.load_file reads it too).
"""

import argparse
import json
import struct
import sys

try:
    import torch
except ImportError as error:
    print(f"pytorch_crosscheck.py: cannot import torch ({error})", file=sys.stderr)
    sys.exit(77)

import pytorch_reference

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}


def load_safetensors(path):
    """The tensors and the metadata of a safetensors file, read with the standard library."""
    with open(path, "rb") as file:
        content = file.read()
    (length,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8:8 + length])
    metadata = header.pop("__metadata__", {})
    data = memoryview(content)[8 + length:]
    tensors = {}
    for name, entry in header.items():
        start, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        flat = torch.frombuffer(bytearray(data[start:end]), dtype=dtype) if end > start else \
            torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"])
    return tensors, metadata


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("batch")
    parser.add_argument("--tolerance", type=float)
    args = parser.parse_args()
    try:
        parameters, metadata = load_safetensors(args.model)
        batch, _ = load_safetensors(args.batch)
        config = json.loads(metadata["memscript.config"])
        torch.manual_seed(0)
        model = pytorch_reference.Decoder(config)
    except (OSError, KeyError, ValueError) as error:
        print(f"crosscheck: cannot build the model: {error!r}", file=sys.stderr)
        return 2
    dtype = next(iter(parameters.values())).dtype
    model = model.to(dtype)
    missing, unexpected = model.load_state_dict(parameters, strict=False)
    if missing or unexpected:
        print(f"crosscheck: parameter names differ: missing {missing}, unexpected {unexpected}",
              file=sys.stderr)
        return 2
    with torch.no_grad():
        logits = model(batch["tokens"])
    expected = batch["logits"].to(dtype)
    error = relative_error(logits, expected)
    tolerance = args.tolerance or (1e-9 if dtype == torch.float64 else 1e-4)
    name = ",".join(layer["mixer"] for layer in config["layers"]) + " " + \
        str(dtype).replace("torch.", "")
    print(f"crosscheck: {name} max relative error {error:.3g}")
    worst = error
    if "train_losses" in batch:
        losses = train(model, batch)
        error = relative_error(losses, batch["train_losses"].to(dtype))
        print(f"crosscheck: {name} {len(losses)} Adam steps, max relative loss error {error:.3g}")
        worst = max(worst, error)
    return 0 if worst <= tolerance else 1


def relative_error(actual, expected):
    return ((actual - expected).abs().max() / expected.abs().max().clamp_min(1e-12)).item()


def train(model, batch):
    """The loss of each step before its update, as memscript's trainer logs it."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0, foreach=False)
    losses = []
    for tokens, targets, mask in zip(batch["train_tokens"], batch["train_targets"],
                                     batch["train_mask"]):
        optimizer.zero_grad()
        loss = pytorch_reference.masked_cross_entropy(model(tokens), targets, mask)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


if __name__ == "__main__":
    sys.exit(main())
