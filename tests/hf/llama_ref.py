"""The Llama family's decoder in plain PyTorch, written from the published model definitions
(Llama: RMSNorm, rotary embeddings with rotate_half, grouped-query attention, SwiGLU MLP; Qwen 2:
biases on the q, k and v products; Qwen 3: an RMSNorm over each q and k head before the rotation),
for the families that the pinned transformers release cannot load (Qwen 3 needs transformers 4.51,
which needs a PyTorch newer than Debian's). It reads Hugging Face's config.json and tensor names
and is used by hfmodel_check.py as the reference where transformers is not; on Llama and Qwen 2 it
is checked against transformers itself first.

Nothing here comes from vkgpt's code: the formulas are the model cards' and papers'
(RoFormer's rotation in the half-split form of Hugging Face's checkpoints, GQA's shared key/value
heads, Shazeer's SwiGLU, Qwen 3's QK-norm)."""
import math

import torch
import torch.nn.functional as F


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def inv_freq(cfg, D):
    theta = cfg.get("rope_theta", 10000.0)
    return 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).double() / D))


class LlamaRef:
    """A decoder whose parameters are a dict of leaf tensors under Hugging Face's names."""

    def __init__(self, cfg, state):
        self.cfg = cfg
        self.L = cfg["num_hidden_layers"]
        self.NH = cfg["num_attention_heads"]
        self.NKV = cfg.get("num_key_value_heads") or self.NH
        self.C = cfg["hidden_size"]
        self.D = cfg.get("head_dim") or self.C // self.NH
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.qk_norm = cfg["model_type"] == "qwen3"
        self.tied = cfg.get("tie_word_embeddings", False)
        self.p = {k: v.detach().clone().float().requires_grad_(True) for k, v in state.items()}
        self.inv_freq = inv_freq(cfg, self.D)

    def params(self):
        return self.p

    def linear(self, x, name):
        b = self.p.get(name + ".bias")
        return F.linear(x, self.p[name + ".weight"], b)

    def attention(self, x, i):
        B, T, _ = x.shape
        a = "model.layers.%d.self_attn." % i
        q = self.linear(x, a + "q_proj").view(B, T, self.NH, self.D)
        k = self.linear(x, a + "k_proj").view(B, T, self.NKV, self.D)
        v = self.linear(x, a + "v_proj").view(B, T, self.NKV, self.D)
        if self.qk_norm:
            q = rms_norm(q, self.p[a + "q_norm.weight"], self.eps)
            k = rms_norm(k, self.p[a + "k_norm.weight"], self.eps)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, D)
        ang = torch.outer(torch.arange(T, dtype=torch.float64), self.inv_freq)
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos().float(), emb.sin().float()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.NH // self.NKV  # query head h reads key/value head h // g
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, self.NH * self.D)
        return self.linear(y, a + "o_proj")

    def mlp(self, x, i):
        m = "model.layers.%d.mlp." % i
        return self.linear(F.silu(self.linear(x, m + "gate_proj")) * self.linear(x, m + "up_proj"),
                           m + "down_proj")

    def logits(self, tokens):
        x = self.p["model.embed_tokens.weight"][tokens]
        for i in range(self.L):
            l = "model.layers.%d." % i
            x = x + self.attention(rms_norm(x, self.p[l + "input_layernorm.weight"], self.eps), i)
            x = x + self.mlp(rms_norm(x, self.p[l + "post_attention_layernorm.weight"], self.eps),
                             i)
        x = rms_norm(x, self.p["model.norm.weight"], self.eps)
        head = self.p["model.embed_tokens.weight" if self.tied else "lm_head.weight"]
        return x @ head.t()
