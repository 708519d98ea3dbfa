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
   bit (names, shapes and values: the layout mapping both ways). vkgpt's device model does not
   run these families yet; their logits are checked when it does.
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


def vkgpt_logits(d, tokens, V):
    tok = os.path.join(d, "tokens.bin")
    out = os.path.join(d, "logits.bin")
    np.asarray(tokens, dtype=np.int32).tofile(tok)
    run("logits", d, tok, out)
    return np.fromfile(out, dtype=np.float32).reshape(len(tokens), V)


def hf_logits(d, tokens):
    model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].tolist()  # not .numpy(): Debian's torch
        # is built against numpy 1, the tests' numpy is 2


def check(what, got, want):
    e = rel_l2(got, want)
    ok = e <= BOUND
    print("%s: relative L2 %.3g (bound %g) %s" % (what, e, BOUND, "ok" if ok else "FAIL"))
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
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    if failures:
        sys.exit("FAILED: " + ", ".join(failures))


main()
