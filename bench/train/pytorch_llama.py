#!/usr/bin/env python3
"""Llama-family training-step benchmark in PyTorch (eager; fp32, or bf16 autocast with --precision
bf16; CPU by default), the reference point of `vkgpt bench train --model`.

The model is the Llama decoder as its model card defines it, in the layout vkgpt trains: a token
embedding (tied to the classifier unless the preset's head is untied) over the padded vocabulary
Vp (a multiple of 128, padding columns masked out of the softmax), pre-norm blocks of RMSNorm,
attention with rotary position embeddings (rotate_half form) over NH query heads and NKV key/value
heads (grouped-query attention: each key/value head repeated for its group), and a SwiGLU MLP
(down(silu(gate(x)) * up(x))), a final RMSNorm. No biases. AdamW decays the 2-D weights only. A
step is what `vkgpt bench train` times: zero the gradients, forward, cross-entropy, backward,
global-norm clipping, AdamW. Attention: F.scaled_dot_product_attention(is_causal=True) where
PyTorch has it (2.0 on), else the (B, NH, T, T) matrices written out, as on PyTorch 1.13.

It prints ms/step and tokens/s on the lines bench/train/compare.sh reads (see pytorch_gpt2.py).
Tokens and weights are random; nothing is checked."""
import argparse
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from pytorch_gpt2 import MaskPadding, make_optimizer, pad_vocab, time_steps

# The shapes of vkgpt's presets (include/vkgpt/model.h, src/model/params.c) for the family.
PRESETS = {
    "llama-125m": dict(layers=12, heads=12, kv_heads=4, channels=768, mlp=2048, ctx=1024,
                       vocab=50257, theta=10000.0, eps=1e-5, tied=True),
    "smollm2-135m": dict(layers=30, heads=9, kv_heads=3, channels=576, mlp=1536, ctx=8192,
                         vocab=49152, theta=100000.0, eps=1e-5, tied=True),
}


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Block(nn.Module):
    def __init__(self, c, sdpa):
        super().__init__()
        C, self.NH, self.NKV = c["channels"], c["heads"], c["kv_heads"]
        self.D, self.sdpa = C // self.NH, sdpa
        self.ln1 = RMSNorm(C, c["eps"])
        self.qkv = nn.Linear(C, (self.NH + 2 * self.NKV) * self.D, bias=False)
        self.attproj = nn.Linear(self.NH * self.D, C, bias=False)
        self.ln2 = RMSNorm(C, c["eps"])
        self.fc = nn.Linear(C, 2 * c["mlp"], bias=False)  # gate and up, one product
        self.fcproj = nn.Linear(c["mlp"], C, bias=False)

    def attention(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split([self.NH * self.D, self.NKV * self.D, self.NKV * self.D],
                                    dim=2)
        q = q.view(B, T, self.NH, self.D).transpose(1, 2)
        k = k.view(B, T, self.NKV, self.D).transpose(1, 2)
        v = v.view(B, T, self.NKV, self.D).transpose(1, 2)
        q = q * cos[:T] + rotate_half(q) * sin[:T]
        k = k * cos[:T] + rotate_half(k) * sin[:T]
        g = self.NH // self.NKV
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.D))
            y = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1) @ v
        return self.attproj(y.transpose(1, 2).reshape(B, T, self.NH * self.D))

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.ln1(x), cos, sin, mask)
        gate, up = self.fc(self.ln2(x)).chunk(2, dim=-1)
        return x + self.fcproj(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, c, sdpa):
        super().__init__()
        C, L = c["channels"], c["layers"]
        self.V, self.Vp = c["vocab"], pad_vocab(c["vocab"])
        self.wte = nn.Parameter(torch.empty(self.Vp, C))
        self.lm_head = None if c["tied"] else nn.Parameter(torch.empty(self.Vp, C))
        self.blocks = nn.ModuleList(Block(c, sdpa) for _ in range(L))
        self.lnf = RMSNorm(C, c["eps"])
        D = C // c["heads"]
        inv = 1.0 / (c["theta"] ** (torch.arange(0, D, 2).double() / D))
        ang = torch.outer(torch.arange(c["ctx"]).double(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", emb.cos().float())
        self.register_buffer("sin", emb.sin().float())
        self.register_buffer("mask", torch.ones(c["ctx"], c["ctx"], dtype=torch.bool).triu(1))
        with torch.no_grad():  # normal(0, 0.02), projections into the residual / sqrt(2L)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.02 / math.sqrt(2 * L) if "proj" in name else 0.02)
            self.wte[self.V:].zero_()
            if self.lm_head is not None:
                self.lm_head[self.V:].zero_()

    def forward(self, idx, targets):
        B, T = idx.shape
        x = F.embedding(idx, self.wte)
        for block in self.blocks:
            x = block(x, self.cos, self.sin, self.mask)
        head = self.wte if self.lm_head is None else self.lm_head
        logits = MaskPadding.apply(F.linear(self.lnf(x), head), self.V)
        return F.cross_entropy(logits.view(B * T, self.Vp), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(PRESETS), default="llama-125m")
    ap.add_argument("--layers", type=int, help="override the preset's layers")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (median reported)")
    ap.add_argument("--warmup-steps", type=int, default=3, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0: off")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = ap.parse_args()
    c = dict(PRESETS[a.model])
    c["layers"] = a.layers or c["layers"]
    c["ctx"] = max(c["ctx"], a.seq)
    if a.steps < 1:
        sys.exit("pytorch_llama: need --steps >= 1")
    sdpa = hasattr(F, "scaled_dot_product_attention")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    model = Llama(c, sdpa).to(dev)
    autocast = torch.autocast(device_type=dev.type, dtype=torch.bfloat16,
                              enabled=a.precision == "bf16")
    opt = make_optimizer(model, a.lr, 0.1)
    B, T = a.batch, a.seq
    tok = torch.randint(0, c["vocab"], (B * T + 1,), device=dev)
    x, y = tok[:-1].view(B, T), tok[1:].view(B, T)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"# pytorch_llama: model {a.model}")
    print(f"torch {torch.__version__} on {dev}, {torch.get_num_threads()} threads, "
          f"{a.precision}, attention {'sdpa' if sdpa else 'math'}")
    print(f"model: L={c['layers']} NH={c['heads']} NKV={c['kv_heads']} C={c['channels']} "
          f"F={c['mlp']} V={c['vocab']} (Vp={model.Vp}), {nparams} parameters")
    print(f"batch: B={B} x T={T} = {B * T} tokens per step; AdamW lr {a.lr:g}, weight decay 0.1, "
          f"clip {a.grad_clip:g}")
    sys.stdout.flush()
    time_steps(model, opt, x, y, autocast, a, c["vocab"], B * T)


if __name__ == "__main__":
    main()
