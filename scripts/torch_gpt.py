#!/usr/bin/env python3
"""The PyTorch peer of `swap-bench --model gpt`: the same GPT-2-style decoder (bytewise tokens
from harness/src/corpus.txt, learned positions, pre-norm blocks with causal attention and a GELU
feed-forward of 4 x d_model, a final layer norm, a linear head to 256 bytes; Adam at 1e-3),
trained without checkpointing, with torch.utils.checkpoint per block, and with
torch.autograd.graph.save_on_cpu(pin_memory=True). Prints one CSV row per mode in the
harness's columns (config, median_step_ms, peak_bytes): run it beside swap-bench on the same
GPU.

    python3 scripts/torch_gpt.py --preset gpt2-small --steps 20 --warmup 6
"""

import argparse
import contextlib
import pathlib
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

PRESETS = {
    "small": dict(layers=2, heads=4, d_model=64, seq=64, batch=8),
    "gpt2-small": dict(layers=12, heads=12, d_model=768, seq=1024, batch=8),
}


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, heads, dropout=0.0, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, 4 * d_model)
        self.ff2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


class Gpt(nn.Module):
    def __init__(self, layers, heads, d_model, seq, checkpointed):
        super().__init__()
        self.tokens = nn.Embedding(256, d_model)
        self.positions = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 256)
        self.checkpointed = checkpointed

    def forward(self, tokens):
        seq = tokens.shape[1]
        mask = torch.triu(
            torch.ones(seq, seq, dtype=torch.bool, device=tokens.device), diagonal=1
        )
        positions = torch.arange(seq, device=tokens.device)
        h = self.tokens(tokens) + self.positions(positions)[None]
        for block in self.blocks:
            if self.checkpointed:
                h = checkpoint(block, h, mask, use_reentrant=False)
            else:
                h = block(h, mask)
        return self.head(self.norm(h))


def batches(corpus, batch, seq, seed):
    gen = torch.Generator().manual_seed(seed)
    span = len(corpus) - seq - 1
    while True:
        starts = torch.randint(0, span, (batch,), generator=gen)
        idx = starts[:, None] + torch.arange(seq + 1)[None]
        window = corpus[idx % len(corpus)]
        yield window[:, :-1], window[:, 1:]


def run(mode, cfg, steps, warmup, device):
    torch.manual_seed(42)
    model = Gpt(cfg["layers"], cfg["heads"], cfg["d_model"], cfg["seq"], mode == "checkpoint")
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    corpus = torch.tensor(
        list((pathlib.Path(__file__).parent.parent / "harness" / "src" / "corpus.txt").read_bytes())
    )
    data = batches(corpus, cfg["batch"], cfg["seq"], 21)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for step in range(warmup + steps):
        x, y = next(data)
        x, y = x.to(device), y.to(device)
        start = time.perf_counter()
        saving = (
            torch.autograd.graph.save_on_cpu(pin_memory=True)
            if mode == "save-on-cpu"
            else contextlib.nullcontext()
        )
        with saving:
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else ""
    return statistics.median(times) * 1e3, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    cfg = dict(PRESETS[args.preset])
    if args.batch:
        cfg["batch"] = args.batch
    device = torch.device(args.device)
    print(f"# torch {torch.__version__} on {device}: {cfg}", file=sys.stderr)
    print("config,median_step_ms,peak_bytes")
    for mode in ["torch-plain", "checkpoint", "save-on-cpu"]:
        step_ms, peak = run(mode, cfg, args.steps, args.warmup, device)
        print(f"{mode},{step_ms:.3f},{peak}", flush=True)


if __name__ == "__main__":
    main()
