"""vkgpt's Hugging Face directories against transformers itself (run by ctest hfmodel_hf with the
Python that has torch and transformers, and the hf_tool binary):

1. GPT-2: vkgpt writes a model it initialised (config.json, model.safetensors); transformers
   loads it with AutoModelForCausalLM.from_pretrained and its logits on a token row equal the
   logits vkgpt's device model computes from the same directory, within 1e-5 relative (L2 over
   every position).
2. GPT-2: transformers initialises a model and saves it (save_pretrained, safetensors); vkgpt
   reads the directory and its device model gives transformers' logits within 1e-5 relative.
3. Llama (GQA, tied) and Qwen 2 (q/k/v biases, untied): transformers saves a model, vkgpt reads
   it and writes it back, and transformers loads vkgpt's copy to the same state dict, bit for
   bit (names, shapes and values: the layout mapping both ways).
4. The Llama family on vkgpt's device model, three configurations: Llama-style (GQA 4/2, tied
   embeddings), Qwen 2-style (q/k/v biases, GQA 4/1, untied head) and Qwen 3-style (QK-norm,
   head_dim 32 with NH D != C, untied head, Llama 3 frequency scaling off). Their logits equal the
   reference's within 1e-5 relative (in bf16 precision within 2e-2), and 10 AdamW steps (lr 1e-3, weight decay 0.1 on the
   matrices, two rows of 32 tokens a step) give per-step losses and final parameters equal to the
   same steps in PyTorch within 1e-5 relative. The reference is transformers' model where the
   pinned release has the family (Llama, Qwen 2), and otherwise (Qwen 3) llama_ref.py, a plain
   PyTorch decoder written from the published definitions, itself checked against transformers
   on the other two first.
Any difference exits 1 naming it."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM)

TOOL = sys.argv[1]
BOUND = 1e-5
BF16_BOUND = 2e-2  # bf16 keeps 8 bits of mantissa: a relative rounding of 2^-9 per value
failures = []


def run(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("hf_tool %s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout,
                                                  r.stderr))


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def vkgpt_logits(d, tokens, V, *precision):
    tok = os.path.join(d, "tokens.bin")
    out = os.path.join(d, "logits.bin")
    np.asarray(tokens, dtype=np.int32).tofile(tok)
    run("logits", d, tok, out, *precision)
    return np.fromfile(out, dtype=np.float32).reshape(len(tokens), V)


def hf_logits(d, tokens):
    model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].tolist()  # not .numpy(): Debian's torch
        # is built against numpy 1, the tests' numpy is 2


def check(what, got, want, bound=BOUND):
    e = rel_l2(got, want)
    ok = e <= bound
    print("%s: relative L2 %.3g (bound %g) %s" % (what, e, bound, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(what)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(7)
    L, NH, C, T, V = 2, 4, 64, 32, 200
    tokens = [int(x) for x in rng.integers(0, V, size=T)]
    with tempfile.TemporaryDirectory() as root:
        # 1. vkgpt writes, transformers reads
        d1 = os.path.join(root, "vkgpt_gpt2")
        run("init", d1, "11", str(L), str(NH), str(C), str(T), str(V))
        with open(os.path.join(d1, "config.json")) as f:
            cfg = json.load(f)
        if cfg["model_type"] != "gpt2":
            failures.append("config.json model_type %r" % cfg["model_type"])
        check("gpt2: vkgpt's directory in transformers", hf_logits(d1, tokens),
              vkgpt_logits(d1, tokens, V))

        # 2. transformers writes, vkgpt reads
        d2 = os.path.join(root, "hf_gpt2")
        m = GPT2LMHeadModel(GPT2Config(n_layer=L, n_head=NH, n_embd=C, n_positions=T,
                                       vocab_size=V, activation_function="gelu_new"))
        m.save_pretrained(d2, safe_serialization=True)
        check("gpt2: transformers' directory in vkgpt", vkgpt_logits(d2, tokens, V),
              hf_logits(d2, tokens))

        # 3. the Llama family's layouts, both ways, bit for bit
        for name, model in [
                ("llama (GQA 4/2, tied)",
                 LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=96,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              num_key_value_heads=2, vocab_size=V,
                                              max_position_embeddings=T,
                                              tie_word_embeddings=True))),
                ("qwen2 (q/k/v biases, untied)",
                 Qwen2ForCausalLM(Qwen2Config(hidden_size=64, intermediate_size=96,
                                              num_hidden_layers=2, num_attention_heads=4,
                                              num_key_value_heads=1, vocab_size=V,
                                              max_position_embeddings=T,
                                              tie_word_embeddings=False))),
        ]:
            src = os.path.join(root, "src")
            dst = os.path.join(root, "dst")
            with torch.no_grad():  # biases are zeros at init: make them tell apart
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.01)
            model.save_pretrained(src, safe_serialization=True)
            run("copy", src, dst)
            back = AutoModelForCausalLM.from_pretrained(dst, torch_dtype=torch.float32)
            a, b = model.state_dict(), back.state_dict()
            bad = [k for k in a if k not in b or a[k].shape != b[k].shape or
                   not torch.equal(a[k], b[k])]
            extra = [k for k in b if k not in a]
            ok = not bad and not extra
            print("%s: %d tensors through vkgpt %s" % (name, len(a), "bitwise" if ok else
                                                       "DIFFER: %s" % (bad + extra)[:5]))
            if not ok:
                failures.append(name)
            import shutil
            shutil.rmtree(src)
            shutil.rmtree(dst)
        family_checks(root)
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    if failures:
        sys.exit("FAILED: " + ", ".join(failures))


def read_dir(d):
    """A Hugging Face directory's config and tensors (torch, fp32) without transformers."""
    from safetensors.torch import load_file
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    return cfg, {k: v.float() for k, v in load_file(os.path.join(d, "model.safetensors")).items()}


def torch_train(params, logits_fn, batches, lr, wd):
    """AdamW steps in PyTorch (beta1 0.9, beta2 0.95, eps 1e-8, decay on the matrices, no
    clipping), on a dict of leaf tensors: each step's mean cross-entropy over the batch."""
    decay = [p for p in params.values() if p.dim() == 2]
    other = [p for p in params.values() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                             {"params": other, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for inp, tgt in batches:
        opt.zero_grad()
        lg = logits_fn(inp)
        loss = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def family_checks(root):
    rng = np.random.default_rng(11)
    V, T, B, STEPS, LR, WD = 200, 32, 2, 10, 1e-3, 0.1
    base = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                vocab_size=V, max_position_embeddings=T, rms_norm_eps=1e-6, rope_theta=10000.0,
                hidden_act="silu")
    configs = [
        ("llama (GQA 4/2, tied)", "llama",
         dict(base, model_type="llama", num_key_value_heads=2, tie_word_embeddings=True,
              attention_bias=False, mlp_bias=False)),
        ("qwen2 (q/k/v biases, GQA 4/1, untied)", "qwen2",
         dict(base, model_type="qwen2", num_key_value_heads=1, tie_word_embeddings=False)),
        ("qwen3 (QK-norm, head_dim 32, untied)", "qwen3",
         dict(base, model_type="qwen3", num_key_value_heads=2, head_dim=32,
              tie_word_embeddings=False, rope_theta=1000000.0)),
    ]
    tokens = [int(x) for x in rng.integers(0, V, size=T)]
    rows = rng.integers(0, V, size=(STEPS * B, T + 1)).astype(np.int32)
    batches = [(torch.tensor(rows[s * B:(s + 1) * B, :T].tolist()),
                torch.tensor(rows[s * B:(s + 1) * B, 1:].tolist())) for s in range(STEPS)]
    for name, kind, cfg in configs:
        d = os.path.join(root, kind)
        if kind in ("llama", "qwen2"):  # transformers initialises and saves it
            cls = LlamaForCausalLM if kind == "llama" else Qwen2ForCausalLM
            conf = (LlamaConfig if kind == "llama" else Qwen2Config)(
                **{k: v for k, v in cfg.items() if k != "model_type"})
            model = cls(conf)
            with torch.no_grad():  # biases and norms start at 0 and 1: make them tell apart
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.02)
            model.save_pretrained(d, safe_serialization=True)
        else:  # vkgpt initialises it from the config.json
            os.makedirs(d)
            cpath = os.path.join(d, "config.json")
            with open(cpath, "w") as f:
                json.dump(cfg, f)
            run("initcfg", d, "5", cpath)
        hcfg, state = read_dir(d)
        ref = LlamaRef(hcfg, state)
        if kind in ("llama", "qwen2"):  # the reference itself against transformers
            model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
            model.eval()
            with torch.no_grad():
                want = model(torch.tensor([tokens])).logits[0].tolist()
                got = ref.logits(torch.tensor([tokens]))[0].tolist()
            check("%s: llama_ref.py against transformers' logits" % name, got, want)
            fn = lambda x, m=model: m(x).logits
            params = dict(model.named_parameters())
        else:
            fn, params = ref.logits, ref.params()
            want = None
        with torch.no_grad():
            want = fn(torch.tensor([tokens]))[0].tolist()
        check("%s: vkgpt's logits" % name, vkgpt_logits(d, tokens, V), want)
        # bf16 precision (bf16 weights and activations, fp32 sums): within bf16's rounding
        check("%s: vkgpt's logits in bf16" % name, vkgpt_logits(d, tokens, V, "bf16"), want,
              BF16_BOUND)
        # 10 AdamW steps on both sides
        tok = os.path.join(root, kind + "_train.bin")
        rows.tofile(tok)
        out = os.path.join(root, kind + "_trained")
        r = subprocess.run([TOOL, "train", d, tok, str(B), str(T), str(STEPS), repr(LR), repr(WD),
                            out], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("hf_tool train failed (%d): %s%s" % (r.returncode, r.stdout, r.stderr))
        vk_losses = [float(line.split()[3]) for line in r.stdout.split("\n") if line]
        losses = torch_train(params, fn, batches, LR, WD)
        check("%s: 10 AdamW steps' losses" % name, vk_losses, losses)
        _, trained = read_dir(out)
        named = dict(model.named_parameters()) if kind != "qwen3" else ref.params()
        keys = sorted(k for k in named if k in trained)
        missing = [k for k in named if k not in trained and not k.startswith("lm_head")]
        if missing:
            failures.append("%s: trained tensors missing %s" % (name, missing[:3]))
        check("%s: parameters after 10 AdamW steps" % name,
              [x for k in keys for x in trained[k].reshape(-1).tolist()],
              [x for k in keys for x in named[k].detach().reshape(-1).tolist()])


from llama_ref import LlamaRef  # noqa: E402 (beside this file)

main()
