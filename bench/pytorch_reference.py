#!/usr/bin/env python3
"""The memscript decoder written by hand in PyTorch eager, as a researcher would without memscript.

Same architecture as runtime/model/decoder.cpp (token embedding, pre-LN blocks
x + mixer(LN(x)) and x + MLP(LN(x)) with GELU, final LN, linear head) and the same mixers as
runtime/model/mixers/, each recurrence a Python loop over time. It times one training step
(forward, masked cross-entropy, backward, AdamW) per case, with the parameter count, so that
memscript_bench_mixers can print both side by side.

    python pytorch_reference.py --cases cases.json --out results.json [--threads 1]

cases.json is a list of {mixer, preset, length, batch, config}, where config is memscript's
resolved decoder configuration (DecoderImpl::config()); results.json is a list of
{mixer, preset, length, parameters, ms, repeats} in the same order. Exits with 77 when torch
cannot be imported.
"""

import argparse
import json
import math
import statistics
import sys
import time

TORCH_MISSING = 77

try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError as error:  # the bench prints a loud SKIPPED line for this
    print(f"pytorch_reference.py: cannot import torch ({error})", file=sys.stderr)
    sys.exit(TORCH_MISSING)


def linear(d_in, d_out, bias=True):
    layer = nn.Linear(d_in, d_out, bias=bias)
    nn.init.normal_(layer.weight, 0.0, 0.02)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


class Lstm(nn.Module):
    # nn.LSTM is what a user would write (memscript runs kernels/lstm/lstm.h; its reference is this op).
    def __init__(self, d_model, config):
        super().__init__()
        self.lstm = nn.LSTM(d_model, config["hidden"], batch_first=True)
        self.output = linear(config["hidden"], d_model)

    def forward(self, x):
        return self.output(self.lstm(x)[0])


class Qlstm(nn.Module):
    def __init__(self, d_model, config):
        super().__init__()
        self.hidden = config["hidden"]
        self.negative = config["negative_eigenvalues"]
        self.gates = linear(d_model, 4 * self.hidden, bias=config.get("gate_bias", False))
        self.forget_bias = nn.Parameter(torch.zeros(self.hidden))
        self.output = linear(self.hidden, d_model)

    def forward(self, x):
        f, i, z, o = self.gates(x).chunk(4, dim=-1)
        f = torch.sigmoid(f + self.forget_bias + 1)
        if self.negative:
            f = 2 * f - 1
        u = torch.sigmoid(i) * torch.tanh(z)
        c = x.new_zeros(x.shape[0], self.hidden)
        cells = []
        for t in range(x.shape[1]):
            c = f[:, t] * c + u[:, t]
            cells.append(c)
        c = torch.stack(cells, dim=1)
        return self.output(torch.sigmoid(o) * torch.tanh(c))


class MinGru(nn.Module):
    def __init__(self, d_model, config):
        super().__init__()
        self.hidden = config["hidden"]
        self.negative = config["negative_eigenvalues"]
        self.input = linear(d_model, 2 * self.hidden)
        self.output = linear(self.hidden, d_model)

    def forward(self, x):
        gate, candidate = self.input(x).chunk(2, dim=-1)
        z = torch.sigmoid(gate)
        carry = 1 - 2 * z if self.negative else 1 - z
        u = z * candidate
        h = x.new_zeros(x.shape[0], self.hidden)
        states = []
        for t in range(x.shape[1]):
            h = carry[:, t] * h + u[:, t]
            states.append(h)
        return self.output(torch.stack(states, dim=1))


class Lru(nn.Module):
    def __init__(self, d_model, config):
        super().__init__()
        n = config["d_state"]
        self.d_state = n
        self.negative = config["negative_eigenvalues"]
        self.nu = nn.Parameter(torch.zeros(n).uniform_(-2.0, 0.0))
        self.theta = nn.Parameter(torch.zeros(n)) if config["max_phase"] > 0 else None
        self.b_re = linear(d_model, n, bias=False)
        self.b_im = linear(d_model, n, bias=False)
        self.c_re = linear(n, d_model, bias=False)
        self.c_im = linear(n, d_model, bias=False)
        self.d = nn.Parameter(torch.randn(d_model) * 0.02)
        self.output = linear(d_model, d_model)

    def forward(self, x):
        s = torch.exp(self.nu)
        a = torch.exp(-s)
        if self.negative:
            a = 2 * a - 1
            gamma = torch.sqrt(4 * torch.exp(-s) * -torch.expm1(-s))
        else:
            gamma = torch.sqrt(-torch.expm1(-2 * s))
        if self.theta is None:
            lam_re, lam_im = a, torch.zeros_like(a)
        else:
            phase = torch.exp(self.theta)
            lam_re, lam_im = a * torch.cos(phase), a * torch.sin(phase)
        in_re, in_im = gamma * self.b_re(x), gamma * self.b_im(x)
        re = x.new_zeros(x.shape[0], self.d_state)
        im = torch.zeros_like(re)
        res, ims = [], []
        for t in range(x.shape[1]):
            re, im = (lam_re * re - lam_im * im + in_re[:, t],
                      lam_im * re + lam_re * im + in_im[:, t])
            res.append(re)
            ims.append(im)
        y = self.c_re(torch.stack(res, 1)) - self.c_im(torch.stack(ims, 1)) + self.d * x
        return self.output(y)


class Heads(nn.Module):
    """The q/k/v projections and head layout of the linear-attention family."""

    def __init__(self, d_model, config):
        super().__init__()
        self.heads, self.head_dim = config["heads"], config["head_dim"]
        width = self.heads * self.head_dim
        bias = config.get("qkv_bias", False)
        self.query = linear(d_model, width, bias=bias)
        self.key = linear(d_model, width, bias=bias)
        self.value = linear(d_model, width, bias=bias)
        self.output = linear(width, d_model)

    def split(self, x):  # [B, L, H*D] -> [B, H, L, D]
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def qkv(self, x, qk_norm):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        if qk_norm:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        return q, k, v

    def merge(self, y):  # [B, H, L, D] -> [B, L, H*D]
        return self.output(y.transpose(1, 2).flatten(2))


class LinearAttention(Heads):
    def __init__(self, d_model, config):
        super().__init__(d_model, config)
        self.relu = config["feature_map"] == "relu"
        self.qk_norm = config["qk_norm"]
        self.eps = config["eps"]

    def phi(self, x):
        return torch.relu(x) if self.relu else F.elu(x) + 1

    def forward(self, x):
        q, k, v = self.qkv(x, self.qk_norm)
        q, k = self.phi(q), self.phi(k)
        b, h, length, d = k.shape
        state = x.new_zeros(b, h, d, v.shape[-1])
        normaliser = x.new_zeros(b, h, d)
        outputs = []
        for t in range(length):
            state = state + k[:, :, t, :, None] * v[:, :, t, None, :]
            normaliser = normaliser + k[:, :, t]
            numerator = (q[:, :, t, :, None] * state).sum(-2)
            denominator = (q[:, :, t] * normaliser).sum(-1, keepdim=True) + self.eps
            outputs.append(numerator / denominator)
        return self.merge(torch.stack(outputs, dim=2))


class DeltaNet(Heads):
    def __init__(self, d_model, config, gated=False):
        super().__init__(d_model, config)
        self.negative = config["negative_eigenvalues"]
        self.qk_norm = config["qk_norm"]
        self.beta = linear(d_model, self.heads, bias=config.get("beta_bias", True))
        # o_norm: each head's output RMS-normalised (eps 1e-5), times a scale per value channel.
        self.output_norm = nn.Parameter(torch.ones(self.head_dim)) if config.get("o_norm") else None
        # qkv_conv: q, k and v each through a causal depthwise convolution (no bias) and a SiLU.
        self.qkv_conv = config.get("qkv_conv", 0)
        if self.qkv_conv:
            width = self.heads * self.head_dim
            for name in ("query_conv", "key_conv", "value_conv"):
                setattr(self, name, nn.Conv1d(width, width, self.qkv_conv, groups=width,
                                              bias=False))
        if gated:
            self.alpha = linear(d_model, self.heads, bias=False)
            self.a_log = nn.Parameter(torch.empty(self.heads).uniform_(1, 16).log())
            self.dt_bias = nn.Parameter(torch.zeros(self.heads))
        self.gated = gated

    def convolved_qkv(self, x):
        def conv(projection, layer):
            padded = F.pad(projection(x).transpose(1, 2), (self.qkv_conv - 1, 0))
            return self.split(F.silu(layer(padded)).transpose(1, 2))
        q = conv(self.query, self.query_conv)
        k = conv(self.key, self.key_conv)
        v = conv(self.value, self.value_conv)
        if self.qk_norm:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        return q, k, v

    def forward(self, x):
        q, k, v = self.convolved_qkv(x) if self.qkv_conv else self.qkv(x, self.qk_norm)
        beta = torch.sigmoid(self.beta(x)).transpose(1, 2)  # [B, H, L]
        if self.negative:
            beta = 2 * beta
        alpha = None
        if self.gated:
            step = F.softplus(self.alpha(x) + self.dt_bias)
            alpha = torch.exp(-torch.exp(self.a_log) * step).transpose(1, 2)
        b, h, length, dk = k.shape
        state = x.new_zeros(b, h, v.shape[-1], dk)  # S maps keys to values
        outputs = []
        for t in range(length):
            if alpha is not None:
                state = state * alpha[:, :, t, None, None]
            k_t = k[:, :, t]
            recalled = (state @ k_t[..., None])[..., 0]
            correction = beta[:, :, t, None] * (v[:, :, t] - recalled)
            state = state + correction[..., None] * k_t[..., None, :]
            outputs.append((state @ q[:, :, t, :, None])[..., 0])
        o = torch.stack(outputs, dim=2)
        if self.output_norm is not None:
            o = o * torch.rsqrt(o.square().mean(-1, keepdim=True) + 1e-5) * self.output_norm
        return self.merge(o)


class RetNet(Heads):
    """Retention with the fixed decay 1 - 2^(-5-h) of head h, per-head RMS norm, swish gate."""

    def __init__(self, d_model, config):
        super().__init__(d_model, config)
        self.gate = linear(d_model, self.heads * self.head_dim, bias=False)

    def forward(self, x):
        q, k, v = self.qkv(x, False)
        k = k * self.head_dim**-0.5
        gamma = 1 - 2.0 ** (-5 - torch.arange(self.heads, dtype=x.dtype, device=x.device))
        b, h, length, dk = k.shape
        state = x.new_zeros(b, h, v.shape[-1], dk)
        outputs = []
        for t in range(length):
            state = gamma[:, None, None] * state + v[:, :, t, :, None] * k[:, :, t, None, :]
            outputs.append((state @ q[:, :, t, :, None])[..., 0])
        o = torch.stack(outputs, dim=2)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.output(o.transpose(1, 2).flatten(2) * F.silu(self.gate(x)))


class Gla(nn.Module):
    """Gated linear attention: S_t = S_{t-1} diag(alpha_t) + v_t k_t^T with a low-rank gate per key
    column, alpha = exp(logsigmoid(.) / tau); per-head RMS norm, swish output gate."""

    def __init__(self, d_model, config):
        super().__init__()
        self.heads, self.head_dim, self.key_dim = config["heads"], config["head_dim"], config["key_dim"]
        self.tau = config["gate_normaliser"]
        keys, width = self.heads * self.key_dim, self.heads * self.head_dim
        self.query = linear(d_model, keys, bias=False)
        self.key = linear(d_model, keys, bias=False)
        self.value = linear(d_model, width, bias=False)
        self.gate_down = linear(d_model, config["gate_rank"], bias=False)
        self.gate_up = linear(config["gate_rank"], keys)
        self.output_gate = linear(d_model, width, bias=False)
        self.output = linear(width, d_model)

    def split(self, x):  # [B, L, H*D] -> [B, H, L, D]
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x):
        q = self.split(self.query(x)) * self.key_dim**-0.5
        k, v = self.split(self.key(x)), self.split(self.value(x))
        alpha = self.split(torch.exp(F.logsigmoid(self.gate_up(self.gate_down(x))) / self.tau))
        b, h, length, dk = k.shape
        state = x.new_zeros(b, h, v.shape[-1], dk)
        outputs = []
        for t in range(length):
            state = state * alpha[:, :, t, None, :] + v[:, :, t, :, None] * k[:, :, t, None, :]
            outputs.append((state @ q[:, :, t, :, None])[..., 0])
        o = torch.stack(outputs, dim=2)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.output(o.transpose(1, 2).flatten(2) * F.silu(self.output_gate(x)))


class Hgrn2(nn.Module):
    """HGRN2: S_t = S_{t-1} diag(f_t) + i_t (1 - f_t)^T per head, f = sigmoid(W_f x), o_t = S_t q_t
    with q = swish(W_q x) / sqrt(expand); an RMS norm over the whole width with a learned scale."""

    def __init__(self, d_model, config):
        super().__init__()
        self.heads, self.head_dim, self.expand = config["heads"], config["head_dim"], config["expand"]
        keys, width = self.heads * self.expand, self.heads * self.head_dim
        self.query = linear(d_model, keys, bias=False)
        self.forget = linear(d_model, keys, bias=False)
        self.input = linear(d_model, width, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(width))
        self.output = linear(width, d_model)

    def split(self, x):  # [B, L, H*D] -> [B, H, L, D]
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x):
        q = self.split(F.silu(self.query(x))) * self.expand**-0.5
        f = self.split(torch.sigmoid(self.forget(x)))
        i = self.split(self.input(x))
        b, h, length, dk = f.shape
        state = x.new_zeros(b, h, i.shape[-1], dk)
        outputs = []
        for t in range(length):
            state = state * f[:, :, t, None, :] + i[:, :, t, :, None] * (1 - f[:, :, t, None, :])
            outputs.append((state @ q[:, :, t, :, None])[..., 0])
        o = torch.stack(outputs, dim=2).transpose(1, 2).flatten(2)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * self.norm_weight
        return self.output(o)


class Mamba(nn.Module):
    def __init__(self, d_model, config):
        super().__init__()
        d_inner, d_state = config["d_inner"], config["d_state"]
        self.d_conv, self.dt_rank, self.d_state = config["d_conv"], config["dt_rank"], d_state
        self.negative = config["negative_eigenvalues"]
        self.in_proj = linear(d_model, 2 * d_inner, bias=False)
        self.conv = nn.Conv1d(d_inner, d_inner, self.d_conv, groups=d_inner)
        self.x_proj = linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner)
        self.out_proj = linear(d_inner, d_model, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1.0)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))

    def forward(self, x):
        xs, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv(F.pad(xs.transpose(1, 2), (self.d_conv - 1, 0))).transpose(1, 2))
        dt, B, C = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))  # [B, L, d_inner]
        A = -torch.exp(self.A_log)  # [d_inner, d_state]
        h = x.new_zeros(x.shape[0], A.shape[0], self.d_state)
        ys = []
        for t in range(x.shape[1]):
            decay = torch.exp(delta[:, t, :, None] * A)
            if self.negative:
                decay = 2 * decay - 1
            h = decay * h + (delta[:, t] * u[:, t])[..., None] * B[:, t, None, :]
            ys.append((h * C[:, t, None, :]).sum(-1))
        y = (torch.stack(ys, dim=1) + u * self.D) * F.silu(z)
        return self.out_proj(y)


class Gpt(nn.Module):
    # Softmax attention over the heads, with learned positions added to its input (positions =
    # "learned", memscript's default) or none; the cross-check loads memscript's weights.
    def __init__(self, d_model, config):
        super().__init__()
        if config["positions"] not in ("learned", "none"):
            raise ValueError(f"gpt positions = {config['positions']!r} is not written here")
        self.heads = config["heads"]
        inner = self.heads * config["head_dim"]
        self.qkv = linear(d_model, 3 * inner)
        self.output = linear(inner, d_model)
        self.positions = None
        if config["positions"] == "learned":
            self.positions = nn.Parameter(torch.randn(config["max_length"], d_model) * 0.5 ** 0.5)

    def forward(self, x):
        if self.positions is not None:
            x = x + self.positions[:x.shape[1]]
        q, k, v = (part.unflatten(-1, (self.heads, -1)).transpose(1, 2)
                   for part in self.qkv(x).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.output(y.transpose(1, 2).flatten(2))


MIXERS = {
    "gpt": Gpt,
    "lstm": Lstm,
    "qlstm": Qlstm,
    "mingru": MinGru,
    "lru": Lru,
    "linear_attention": LinearAttention,
    "deltanet": DeltaNet,
    "gated_deltanet": lambda d_model, config: DeltaNet(d_model, config, gated=True),
    "mamba": Mamba,
    "retnet": RetNet,
    "gla": Gla,
    "hgrn2": Hgrn2,
}


def norm(d_model, config):
    """LayerNorm, or RMSNorm with norm = "rms" (weight only), eps from norm_eps."""
    eps = config.get("norm_eps", 1e-5)
    return nn.RMSNorm(d_model, eps=eps) if config.get("norm") == "rms" else nn.LayerNorm(d_model, eps=eps)


class Block(nn.Module):
    def __init__(self, d_model, mlp_hidden, mixer, config):
        super().__init__()
        self.mixer = mixer
        self.mixer_norm = norm(d_model, config)
        self.mlp_hidden = mlp_hidden
        self.swiglu = config.get("mlp") == "swiglu"
        bias = config.get("mlp_bias", not self.swiglu)  # GELU's have biases, SwiGLU's not
        if mlp_hidden > 0:  # mlp_ratio = 0: no MLP half
            self.mlp_norm = norm(d_model, config)
            if self.swiglu:  # W_down (silu(W_gate h) * W_up h)
                self.mlp_gate = linear(d_model, mlp_hidden, bias=bias)
            self.mlp_up = linear(d_model, mlp_hidden, bias=bias)
            self.mlp_down = linear(mlp_hidden, d_model, bias=bias)

    def forward(self, x):
        h = x + self.mixer(self.mixer_norm(x))
        if self.mlp_hidden == 0:
            return h
        n = self.mlp_norm(h)
        if self.swiglu:
            return h + self.mlp_down(F.silu(self.mlp_gate(n)) * self.mlp_up(n))
        return h + self.mlp_down(F.gelu(self.mlp_up(n)))


class Decoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        d_model = config["d_model"]
        self.scale = math.sqrt(d_model) if config["scale_embedding"] else 1.0
        self.embedding = nn.Embedding(config["vocab"], d_model)
        nn.init.normal_(self.embedding.weight, 0.0, 0.02)
        self.positions = None
        if config.get("residual_positions", "none") == "learned":
            self.positions = nn.Parameter(torch.randn(config["max_length"], d_model) * 0.02)
        self.blocks = nn.ModuleList(
            Block(d_model, config.get("mlp_hidden", config.get("mlp_ratio", 0) * d_model),
                  MIXERS[layer["mixer"]](d_model, layer), config)
            for layer in config["layers"])
        self.final_norm = norm(d_model, config)
        self.head = linear(d_model, config["classes"], bias=config.get("head_bias", True))

    def forward(self, tokens):
        x = self.embedding(tokens) * self.scale
        if self.positions is not None:
            x = x + self.positions[:tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))


def masked_cross_entropy(logits, targets, mask):
    losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    return (losses * mask.flatten().float()).sum() / mask.sum().clamp_min(1)


def time_case(case, args):
    torch.manual_seed(41)
    device = torch.device(args.device)
    model = Decoder(case["config"]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01)
    shape = (case["batch"], case["length"])
    # Bit parity, every position scored: the batch memscript's bench trains on.
    inputs = torch.randint(0, 2, shape).to(device)
    targets = inputs.cumsum(1) % 2
    mask = torch.ones(shape, dtype=torch.bool, device=device)

    def step():
        optimizer.zero_grad()
        masked_cross_entropy(model(inputs), targets, mask).backward()
        optimizer.step()
        if device.type == "cuda":  # the step is queued, not done, until the GPU finishes it
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    seconds = []
    while len(seconds) < args.max_repeats and (len(seconds) < args.min_repeats
                                               or sum(seconds) < args.budget):
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return {
        "mixer": case["mixer"],
        "preset": case["preset"],
        "length": case["length"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "ms": statistics.median(seconds) * 1e3,
        "repeats": len(seconds),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", required=True, help="JSON list of cases (see above)")
    parser.add_argument("--out", required=True, help="where to write the JSON results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--max-repeats", type=int, default=50)
    parser.add_argument("--budget", type=float, default=0.3,
                        help="seconds of timed steps per case beyond the fewest")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with open(args.cases) as f:
        cases = json.load(f)
    results = [time_case(case, args) for case in cases]
    with open(args.out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
