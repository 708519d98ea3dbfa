#!/usr/bin/env python3
"""GPT-2 training-step benchmark in PyTorch (eager; fp32, or bf16 autocast with --precision bf16;
CPU by default), the reference point of `vkgpt bench train`.

The model follows llm.c's GPT-2 layout, as vkgpt does: token + position embedding, pre-layernorm
blocks (causal self-attention with a fused qkv projection of 3C outputs and an output projection;
an MLP of 4C with tanh-approximated GELU), a final layernorm and a classifier tied to the token
embedding over the padded vocabulary Vp (a multiple of 128), whose padding columns are masked out
of the softmax (their logits set to -inf). AdamW decays the 2-D weights only. A step is what `vkgpt bench train` times: zero the
gradients, forward, cross-entropy, backward, global-norm clipping, AdamW.

It prints the config, the loss, ms/step (median over the timed steps, wall clock) and tokens/s,
on lines `ms/step: X` and `tokens/s: Y` that bench/train/compare.sh reads. Tokens and weights are
random; nothing is checked. Written for PyTorch 1.13 (Debian 12's python3-torch) and newer.

Attention: --attention sdpa (the default where PyTorch has it, 2.0 on) calls
F.scaled_dot_product_attention with is_causal=True, PyTorch's own fused (flash or
memory-efficient) kernels, the eager baseline a user would write today; math writes the
(B, NH, T, T) matrices out as 1.13 must. fp32 matrix products stay fp32 (TF32 off, PyTorch's
default). --precision bf16 runs the forward pass and the loss under torch.autocast(bfloat16):
fp32 weights, gradients and AdamW, bf16 products and activations, as `vkgpt --precision bf16`.
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Same presets as `vkgpt bench train --preset`.
PRESETS = {
    "l4": dict(layers=4, heads=4, channels=256, ctx=128, vocab=50257, batch=8, seq=128),
    "default": dict(layers=4, heads=4, channels=128, ctx=64, vocab=257, batch=8, seq=64),
}


def pad_vocab(v):
    return (v + 127) // 128 * 128


class MaskPadding(torch.autograd.Function):
    """Sets the padding columns V..Vp of the logits to -inf in place, keeping them out of the
    softmax. The backward passes the gradient through unchanged: the softmax's gradient there
    is already 0 (probability 0, never a target), so no (B, T, Vp) tensor is copied."""

    @staticmethod
    def forward(ctx, logits, V):
        logits[..., V:] = float("-inf")
        ctx.mark_dirty(logits)
        return logits

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Block(nn.Module):
    """One pre-layernorm transformer block; weights stored (out, in) like llm.c's."""

    def __init__(self, C, NH, sdpa):
        super().__init__()
        self.NH, self.sdpa = NH, sdpa
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def attention(self, x, mask):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, NH, T, hs)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
            att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.attproj(y)

    def forward(self, x, mask):
        x = x + self.attention(self.ln1(x), mask)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, NH, C, maxT, V, sdpa):
        super().__init__()
        self.V, self.Vp = V, pad_vocab(V)
        self.wte = nn.Parameter(torch.empty(self.Vp, C))  # (Vp, C), tied classifier
        self.wpe = nn.Parameter(torch.empty(maxT, C))  # (maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH, sdpa) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        # True above the diagonal: the future a position must not see.
        self.register_buffer("mask", torch.ones(maxT, maxT, dtype=torch.bool).triu(1))
        self.init_weights(L)

    def init_weights(self, L):
        """GPT-2's: normal(0, 0.02), residual projections / sqrt(2L), biases 0, layernorms 1."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0 if name.endswith("weight") else 0.0)  # layernorm w, biases
                else:
                    std = 0.02 / math.sqrt(2 * L) if "proj" in name else 0.02
                    p.normal_(0.0, std)
            self.wte[self.V:].zero_()

    def forward(self, idx, targets):
        B, T = idx.shape
        x = F.embedding(idx, self.wte) + self.wpe[:T]
        for block in self.blocks:
            x = block(x, self.mask)
        logits = MaskPadding.apply(F.linear(self.lnf(x), self.wte), self.V)  # (B, T, Vp)
        return F.cross_entropy(logits.view(B * T, self.Vp), targets.view(-1))


def make_optimizer(model, lr, weight_decay):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="l4")
    for k in ("layers", "heads", "channels", "ctx", "vocab", "batch", "seq"):
        ap.add_argument("--" + k, type=int, help="override the preset's " + k)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (median reported)")
    ap.add_argument("--warmup-steps", type=int, default=3, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--grad-clip", type=float, default=1.0, help="0: off")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast(bfloat16)")
    ap.add_argument("--attention", choices=["auto", "sdpa", "math"], default="auto",
                    help="auto: sdpa where PyTorch has it, else math")
    a = ap.parse_args()
    cfg = dict(PRESETS[a.preset])
    for k in cfg:
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    if a.ctx is None:
        cfg["ctx"] = max(cfg["ctx"], cfg["seq"])
    if a.steps < 1 or cfg["seq"] > cfg["ctx"] or cfg["channels"] % cfg["heads"]:
        sys.exit("pytorch_gpt2: need --steps >= 1, --seq <= --ctx, --channels % --heads == 0")

    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if a.attention == "sdpa" and not has_sdpa:
        sys.exit("pytorch_gpt2: --attention sdpa needs PyTorch 2.0 or newer, not "
                 + torch.__version__)
    sdpa = a.attention == "sdpa" or (a.attention == "auto" and has_sdpa)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    model = GPT2(cfg["layers"], cfg["heads"], cfg["channels"], cfg["ctx"], cfg["vocab"],
                 sdpa).to(dev)
    if a.precision == "bf16":
        autocast = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    else:
        autocast = torch.autocast(device_type=dev.type, enabled=False)
    opt = make_optimizer(model, a.lr, 0.1)
    B, T = cfg["batch"], cfg["seq"]
    tok = torch.randint(0, cfg["vocab"], (B * T + 1,), device=dev)
    x, y = tok[:-1].view(B, T), tok[1:].view(B, T)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"# pytorch_gpt2: preset {a.preset}")
    tf32 = dev.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    print(f"torch {torch.__version__} on {dev}, {torch.get_num_threads()} threads, "
          f"{'bf16 autocast' if a.precision == 'bf16' else 'fp32'}"
          f"{' (TF32 on)' if tf32 else ''}, attention {'sdpa' if sdpa else 'math'}")
    print(f"model: L={cfg['layers']} NH={cfg['heads']} C={cfg['channels']} maxT={cfg['ctx']} "
          f"V={cfg['vocab']} (Vp={model.Vp}), {nparams} parameters")
    print(f"batch: B={B} x T={T} = {B * T} tokens per step; AdamW lr {a.lr:g}, weight decay 0.1, "
          f"clip {a.grad_clip:g}")
    sys.stdout.flush()

    time_steps(model, opt, x, y, autocast, a, cfg["vocab"], B * T)


def time_steps(model, opt, x, y, autocast, a, V, tokens):
    """Run a.warmup_steps + a.steps training steps (zero, forward and loss, backward, clipping,
    AdamW) and print the loss, ms/step (median of the timed steps) and tokens/s."""
    times, losses = [], []
    for s in range(a.warmup_steps + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(x, y)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        losses.append(loss.item())  # waits for the step (matters on CUDA)
        if s >= a.warmup_steps:
            times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times)
    print(f"loss: {losses[0]:.4f} at the first step, {losses[-1]:.4f} at the last "
          f"(ln V = {math.log(V):.4f})")
    print(f"steps: {a.warmup_steps} warm-up (untimed), {a.steps} timed: ms/step min "
          f"{min(times):.2f} median {med:.2f} max {max(times):.2f}")
    print(f"ms/step: {med:.2f}")
    print(f"tokens/s: {tokens / (med / 1e3):.1f}")


if __name__ == "__main__":
    main()
