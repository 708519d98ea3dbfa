#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) and fuzz/vocab_small/.

Seeds are small valid inputs and a few edge cases of each format, built here from the format
descriptions (include/vkgpt/io.h, src/train/checkpoint.h, comm.h, the CLI), not by vkgpt, so the
generator also documents what a valid input looks like. fuzz/vocab_small is a small GPT-2-style
vocabulary cut from data/gpt2: the 256 byte tokens, the products of GPT-2's first 100 merges and
<|endoftext|>, with those 100 merges. Run from anywhere: python3 fuzz/make_corpus.py
Files that inputs of fixed findings left in fuzz/corpus (named finding-*) are kept.
"""

import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def clear(target):
    d = os.path.join(CORPUS, target)
    if os.path.isdir(d):
        for name in os.listdir(d):
            if not name.startswith("finding-"):
                os.remove(os.path.join(d, name))


def header(*ints):
    slots = list(ints) + [0] * (256 - len(ints))
    return struct.pack("<256i", *slots)


def num_params(maxT, V, L, NH, C, Vp):
    return Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C


def floats(n, scale=0.01):
    return struct.pack("<%df" % n, *[(i % 7 - 3) * scale for i in range(n)])


# ---- llm.c model files ------------------------------------------------------------------------

def model_files():
    t = "modelfile"
    clear(t)
    cfg = (4, 5, 1, 1, 2, 8)  # maxT V L NH C Vp
    n = num_params(*cfg)
    put(t, "fp32_v3", header(20240326, 3, *cfg) + floats(n))
    bf16 = struct.pack("<%dH" % n, *[(0x3c00 + i) & 0xffff for i in range(n)])
    put(t, "bf16_v5", header(20240326, 5, *cfg) + bf16)
    cfg2 = (3, 3, 2, 2, 4, 4)
    put(t, "fp32_two_layers", header(20240326, 3, *cfg2) + floats(num_params(*cfg2)))
    put(t, "truncated", header(20240326, 3, *cfg) + floats(n - 1))
    put(t, "trailing_byte", header(20240326, 3, *cfg) + floats(n) + b"\0")
    put(t, "header_only", header(20240326, 3, *cfg))
    put(t, "old_version", header(20240326, 1, *cfg) + floats(n))
    put(t, "bad_magic", header(20240327, 3, *cfg) + floats(n))
    put(t, "padded_below_vocab", header(20240326, 3, 4, 8, 1, 1, 2, 5) + floats(n))
    put(t, "heads_not_dividing", header(20240326, 3, 4, 5, 1, 3, 2, 8) + floats(n))
    put(t, "implausible", header(20240326, 3, 1024, 50257, 10000, 16, 65536, 50304))
    put(t, "short", b"\x26\x2e\x35\x01")


# ---- state files ------------------------------------------------------------------------------

def state_file(cfg, n_override=None, m=None, v=None):
    n = num_params(*cfg) if n_override is None else n_override
    slots = [0] * 256
    slots[0], slots[1] = 20250611, 1
    slots[2:8] = cfg
    slots[8], slots[9], slots[10], slots[12], slots[13], slots[14] = 2, 4, 8, 1, 0, 1337
    slots[16], slots[17], slots[18] = 0, 10, 2
    f32 = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]
    slots[19], slots[20], slots[21] = f32(3e-4), f32(0.1), f32(0.0)
    slots[22], slots[23], slots[24], slots[25] = f32(0.9), f32(0.999), f32(1e-8), f32(1.0)
    slots[32], slots[34] = 3, 24
    slots[36], slots[38] = 0x1234, 0x5678
    slots[44], slots[46], slots[48] = 0, 3, 5  # epoch, batch, num_batches (u64, low halves)
    slots[54], slots[55] = n & 0xffffffff, n >> 32
    slots[56], slots[57] = 0x0badcafe, 1
    body = struct.pack("<256i", *slots)
    body += floats(n, 0.001) if m is None else m
    body += floats(n, 0.0001) if v is None else v
    return body + struct.pack("<I", zlib.crc32(body))


def state_files():
    t = "statefile"
    clear(t)
    cfg = (4, 5, 1, 1, 2, 8)
    good = state_file(cfg)
    put(t, "valid", good)
    put(t, "valid_two_layers", state_file((3, 3, 2, 2, 4, 4)))
    put(t, "bad_checksum", good[:-1] + bytes([good[-1] ^ 1]))
    put(t, "truncated", good[:-5])
    put(t, "header_only", good[:1024])
    put(t, "wrong_count", state_file(cfg, n_override=num_params(*cfg) + 1))
    put(t, "bad_version", good[:4] + struct.pack("<i", 2) + good[8:])
    put(t, "bad_config", good[:8] + struct.pack("<i", 0) + good[12:])


def outer_file(n, values, count_override=None):
    """DiLoCo's outer.bin (src/train/checkpoint.h): header slots 0-6, then the floats."""
    body = struct.pack("<%df" % len(values), *values)
    count = len(values) if count_override is None else count_override
    h = struct.pack("<7I", 20261128, 1, n, 0, count, 0, zlib.crc32(body))
    return h + bytes(1024 - len(h)) + body


def outer_files():
    t = "outerfile"
    clear(t)
    n = 4
    blocking = [0.5, -0.25, 1.0, 2.0] * 2 + [0.1, -0.1, 0.2, 0.3] * 2 + [1e-4, 2e-4, 0.0, 3e-4]
    delayed = [0.5] * (2 * n) + [-0.1] * n + [0.2] * n + [0.01] * n + [1e-4] * n + [-0.3] * n
    put(t, "valid_two_replicas", outer_file(n, blocking))
    put(t, "valid_delayed", outer_file(n, delayed))
    put(t, "valid_one_replica", outer_file(n, [0.25] * (2 * n)))
    put(t, "negative_v", outer_file(n, blocking[:-1] + [-1e-4]))
    put(t, "not_finite", outer_file(n, blocking[:3] + [float("inf")] + blocking[4:]))
    good = outer_file(n, blocking)
    put(t, "bad_checksum", good[:-1] + bytes([good[-1] ^ 1]))
    put(t, "truncated", good[:-3])
    put(t, "wrong_count", outer_file(n, blocking, count_override=len(blocking) + 1))
    put(t, "header_only", good[:1024])


# ---- run.json ---------------------------------------------------------------------------------

def run_configs():
    t = "runconf"
    clear(t)

    def doc(flags, **top):
        d = {"format": "vkgpt-run", "version": 1, "flags": flags}
        d.update(top)
        return json.dumps(d)

    put(t, "every_type", doc({"int-range": "1024", "ll-range": "-5", "u64": "18446744073709549568",
                              "float-range": "2.5e-3", "double": "0.1", "str": "say \"hi\"\n\x01",
                              "choice": "beta", "bool": "true"}))
    put(t, "empty_flags", doc({}))
    put(t, "unknown_flag", doc({"nope": "1"}))
    put(t, "skipped_flag", doc({"skipped": "1"}))
    put(t, "out_of_range", doc({"int-range": "0", "float-range": "11"}))
    put(t, "not_a_string", '{"format": "vkgpt-run", "version": 1, "flags": {"u64": 5}}')
    put(t, "control_bytes", doc({"\x1b[2J": "\x07", "choice": "\x1b]0;x\x07"}))
    put(t, "other_format", doc({}, format="\u009b2J"))
    put(t, "other_version", doc({}, version=2))
    put(t, "twice", '{"format": "vkgpt-run", "version": 1, "flags": {"str": "a", "str": "b"}}')
    put(t, "truncated", doc({"str": "abc"})[:-4])


# ---- token shards -----------------------------------------------------------------------------

def shards():
    t = "shard"
    clear(t)
    toks = [50256, 464, 2068, 7586, 21831, 0, 65535]
    put(t, "seven_tokens", header(20240520, 1, len(toks)) + struct.pack("<7H", *toks))
    put(t, "empty", header(20240520, 1, 0))
    put(t, "count_too_large", header(20240520, 1, 8) + struct.pack("<7H", *toks))
    put(t, "negative_count", header(20240520, 1, -1))
    put(t, "odd_size", header(20240520, 1, 1) + b"\x01")
    put(t, "bad_version", header(20240520, 2, 0))
    put(t, "short", b"\x38\xf0\x34\x01")


# ---- tokenizer files --------------------------------------------------------------------------

def tok_body(tokens):
    return b"".join(bytes([len(tk)]) + tk for tk in tokens)


def tokenizer_files():
    t = "tokfile"
    clear(t)
    small = [b"a", b"b", b" the", b"<|endoftext|>"]
    put(t, "v2_small", header(20240328, 2, 4, 3) + tok_body(small))
    byte_level = [bytes([i]) for i in range(256)] + [b"<|endoftext|>"]
    put(t, "v2_byte_level", header(20240328, 2, 257, 256) + tok_body(byte_level))
    put(t, "v2_long_token", header(20240328, 2, 2, 0) + tok_body([b"x" * 255, b"y"]))
    put(t, "v1_wrong_vocab", header(20240328, 1, 4) + tok_body(small))
    put(t, "zero_length_token", header(20240328, 2, 2, 0) + b"\x01a\x00")
    put(t, "trailing_bytes", header(20240328, 2, 4, 3) + tok_body(small) + b"zz")
    put(t, "truncated_token", header(20240328, 2, 4, 3) + tok_body(small)[:-3])
    put(t, "eot_out_of_range", header(20240328, 2, 4, 4) + tok_body(small))
    put(t, "huge_vocab", header(20240328, 2, 1 << 24, 0) + b"\x01a")


# ---- GPT-2 vocabulary files -------------------------------------------------------------------

def bytes_to_unicode():
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
            list(range(0xAE, 0x100)))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def small_vocab(merges_kept=100):
    with open(os.path.join(ROOT, "data", "gpt2", "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [tuple(line.split()) for line in lines[1:] if line.strip()][:merges_kept]
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    for left, right in merges:
        if left + right not in tokens:
            tokens.append(left + right)
    tokens.append("<|endoftext|>")
    encoder = {tok: i for i, tok in enumerate(tokens)}
    d = os.path.join(HERE, "vocab_small")
    os.makedirs(d, exist_ok=True)
    enc_text = json.dumps(encoder, ensure_ascii=False, separators=(",", ":"))
    bpe_text = "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)
    with open(os.path.join(d, "encoder.json"), "w", encoding="utf-8") as f:
        f.write(enc_text)
    with open(os.path.join(d, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write(bpe_text)
    return enc_text, bpe_text, merges


def vocab_files():
    enc_text, bpe_text, merges = small_vocab()
    t = "encoder_json"
    clear(t)
    put(t, "small_vocab", enc_text)
    put(t, "small_vocab_spaced", enc_text.replace(",", ",\n  ").replace("{", "{\n  "))
    put(t, "escaped_keys", json.dumps(json.loads(enc_text), ensure_ascii=True))
    put(t, "empty_object", "{}")
    put(t, "surrogate_pair", '{"\\ud83d\\ude42": 0, "a\\u00e9\\n\\"\\\\\\/": 1}')
    put(t, "unpaired_surrogate", '{"\\ud83d": 0}')
    put(t, "fraction", '{"a": 1.5}')
    put(t, "huge_id", '{"a": 99999999999999999999}')
    put(t, "negative_id", '{"a": -1}')
    put(t, "truncated", enc_text[: len(enc_text) // 2])
    put(t, "trailing_data", enc_text + " x")
    t = "vocab_bpe"
    clear(t)
    put(t, "small_vocab", bpe_text)
    put(t, "crlf", bpe_text.replace("\n", "\r\n"))
    put(t, "reversed_ranks", "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges[::-1]))
    put(t, "repeated_merge", bpe_text + "%s %s\n" % merges[0])
    put(t, "version_only", "#version: 0.2\n")
    put(t, "empty", "")
    put(t, "no_trailing_newline", bpe_text.rstrip("\n"))
    put(t, "blank_lines", "#version: 0.2\n\n\n" + "%s %s\n\n" % merges[0])
    put(t, "three_tokens", "#version: 0.2\na b c\n")
    put(t, "unknown_part", "#version: 0.2\nzzzzzz q\n")
    put(t, "result_not_a_token", "#version: 0.2\nq z\n")
    put(t, "outside_byte_alphabet", "#version: 0.2\n\u00e9 \u4e2d\n")


# ---- text -------------------------------------------------------------------------------------

def texts():
    t = "text"
    clear(t)
    put(t, "ascii", "Hello, World! It's a plain sentence; we'll see 3.14159 and -42.\n")
    put(t, "contractions", "it's don't we're they've I'm you'll he'd 'S ''s")
    put(t, "spaces", "  a  b\t\tc \n\n \r\n   \u00a0x\u3000y\u2028 ")
    put(t, "unicode", "café naïve 日本語のテキスト 🙂🚀 👨\u200d👩\u200d👧 x² ½ Ⅻ ٣٤ e\u0301")
    put(t, "invalid_utf8", b"abc\xff\xfe \xc3\x28 \xe2\x82 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \x80")
    put(t, "truncated_at_end", b"caf\xc3")
    put(t, "control_bytes", b"\x00\x01\x1f\x7f<|endoftext|>\x00")
    put(t, "punctuation", "...!!!??? --- *** ~~~ «» “” —")
    put(t, "empty", b"")


# ---- launcher variables -----------------------------------------------------------------------

def envs():
    t = "comm_env"
    clear(t)
    put(t, "none", "")
    put(t, "torchrun", "RANK=1\nWORLD_SIZE=2\nLOCAL_RANK=1\nLOCAL_WORLD_SIZE=2\nMASTER_ADDR=10.0.0.1\n"
        "MASTER_PORT=29500\nTORCHELASTIC_RUN_ID=abc\nTORCHELASTIC_RESTART_COUNT=3\n")
    put(t, "torchrun_agent_store", "RANK=0\nWORLD_SIZE=1\nMASTER_PORT=65535\n"
        "TORCHELASTIC_USE_AGENT_STORE=True\n")
    put(t, "slurm", "SLURM_PROCID=3\nSLURM_NTASKS=4\nSLURM_LOCALID=1\nSLURM_JOB_ID=123456\n"
        "SLURM_STEP_ID=0\nSLURM_NNODES=1\n")
    put(t, "slurm_hosts", "SLURM_PROCID=3\nSLURM_NTASKS=4\nSLURM_NNODES=2\n")
    put(t, "openmpi", "OMPI_COMM_WORLD_RANK=0\nOMPI_COMM_WORLD_SIZE=2\nOMPI_COMM_WORLD_LOCAL_RANK=0\n"
        "OMPI_COMM_WORLD_LOCAL_SIZE=2\nOMPI_MCA_ess_base_jobid=77\n")
    put(t, "vkgpt", "VKG_RANK=1\nVKG_WORLD_SIZE=3\nVKG_LOCAL_RANK=1\nVKG_JOB_ID=0123456789abcdef\n"
        "VKG_COMM_TRANSPORT=ipc\nVKG_COMM_IPC_DIR=/tmp/x\nVKG_COMM_TIMEOUT=2.5\n"
        "VKG_COMM_GENERATION=4\nVKG_COMM_BIND_ADDR=127.0.0.1\n"
        "VKG_COMM_CURVE_AUTHORIZED=/nonexistent/keys\n")
    put(t, "rank_outside", "RANK=2\nWORLD_SIZE=2\n")
    put(t, "rank_only", "RANK=0\n")
    put(t, "bad_numbers", "WORLD_SIZE=2x\nRANK=-1\nMASTER_PORT=70000\nVKG_COMM_TIMEOUT=nan\n")
    put(t, "inproc", "VKG_COMM_TRANSPORT=inproc\n")
    put(t, "long_addr", "MASTER_ADDR=" + "h" * 300 + "\n")
    put(t, "empty_addr", "MASTER_ADDR=\nVKG_JOB_ID=\n")


# ---- command-line flags -----------------------------------------------------------------------

def args(*a):
    return "\0".join(a)


def flag_lists():
    t = "flags"
    clear(t)
    put(t, "every_type", args("--int", "-3", "--int-range=1024", "--ll", "4K", "--ll-range",
                              "-5", "--u64", "18446744073709549568", "--float", "2.5e-3",
                              "--float-range=10", "--str", "x", "--choice", "beta", "--bool"))
    put(t, "help", args("--help"))
    put(t, "unknown", args("--nope", "1"))
    put(t, "missing_value", args("--int"))
    put(t, "not_a_number", args("--int=12abc", "--float", "nan"))
    put(t, "out_of_range", args("--int-range", "0", "--float-range", "11"))
    put(t, "bad_choice", args("--choice", "delta"))
    put(t, "suffixes", args("--ll", "1G", "--ll-range", "2m", "--int", "1k"))
    put(t, "data_parallel", args("--world-size", "3", "--rank", "2", "--master-addr", "10.0.0.1",
                                 "--master-port", "29600", "--transport", "ipc", "--comm-timeout",
                                 "30", "--rank-batch", "4,2,2", "--lr-scale", "sqrt",
                                 "--base-batch", "512", "--bucket-mb", "4", "--no-overlap"))
    put(t, "rank_batch_mismatch", args("--world-size", "2", "--rank-batch", "4,2,2"))
    put(t, "bad_transport", args("--transport", "udp"))
    put(t, "rank_outside", args("--world-size", "2", "--rank", "5"))

# ---- safetensors files and the sharded index ---------------------------------------------------

def safetensors(tensors, metadata=None, pad=True, data_extra=b""):
    """A safetensors file: tensors is a list of (name, dtype, shape, data bytes), stored in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data + data_extra


def safetensors_files():
    t = "safetensors"
    clear(t)
    f32 = ("w", "F32", [2, 3], floats(6))
    bf16 = ("b", "BF16", [4], struct.pack("<4H", 0x3f80, 0xc000, 0x7fc0, 0x0001))
    f16 = ("h", "F16", [1, 1, 2, 1], struct.pack("<2H", 0x3c00, 0x7bff))
    scalar = ("s", "F32", [], floats(1))
    ints = ("i", "I64", [2], struct.pack("<2q", 1, -1))
    empty = ("e", "F16", [0, 3], b"")
    good = safetensors([f32, bf16, f16, scalar, ints, empty], {"format": "pt"})
    put(t, "valid", good)
    put(t, "valid_unpadded", safetensors([f32, bf16], pad=False))
    put(t, "empty_file_of_tensors", safetensors([]))
    put(t, "unicode_name", safetensors([("w\u00e4 \"q\"", "U8", [3], b"abc")]))
    put(t, "truncated", good[:-1])
    put(t, "trailing_byte", good + b"\0")
    put(t, "header_too_large", struct.pack("<Q", 100000001) + good[8:])
    put(t, "header_past_file", struct.pack("<Q", len(good)) + good[8:])
    put(t, "short", b"\x10\x00\x00")
    put(t, "size_mismatch", safetensors([("w", "F32", [3], floats(2))]))
    put(t, "unknown_dtype", safetensors([("w", "F128", [1], floats(4))]))
    put(t, "overflowing_shape", safetensors([("w", "F32", [4294967296, 4294967296], b"")]))
    gap = json.dumps({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
    put(t, "gap", struct.pack("<Q", len(gap)) + gap + floats(2))
    dup = (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
           b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
    put(t, "duplicate_name", struct.pack("<Q", len(dup)) + dup + floats(2))
    extra = (b'{"a":{"x":[1.5e3,{"y":null}],"dtype":"BF16","shape":[1],"data_offsets":[0,2]},'
             b'"__metadata__":{"k":"v"}}  ')
    put(t, "unknown_field", struct.pack("<Q", len(extra)) + extra + b"\x80\x3f")

    t = "safetensors_index"
    clear(t)
    put(t, "valid", json.dumps({
        "metadata": {"total_size": 1234, "note": [1.5, None, True]},
        "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors",
                       "model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}, indent=2))
    put(t, "escape_folder", json.dumps({"weight_map": {"a": "../a.safetensors"}}))
    put(t, "subfolder", json.dumps({"weight_map": {"a": "sub/a.safetensors"}}))
    put(t, "duplicate", '{"weight_map": {"a": "x", "a": "y"}}')
    put(t, "no_weight_map", '{"metadata": {}}')



# ---- Hugging Face config.json -----------------------------------------------------------------

def hf_configs():
    t = "hfconfig"
    clear(t)
    llama = ('{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, '
             '"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, '
             '"max_position_embeddings": 128, "vocab_size": 1000, "rms_norm_eps": 1e-05, '
             '"rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": true, '
             '"rope_scaling": null, "torch_dtype": "bfloat16", "architectures": ["LlamaForCausalLM"]}')
    put(t, "llama", llama.encode())
    put(t, "llama3_scaling", llama.replace('"rope_scaling": null', '"rope_scaling": {"rope_type": '
        '"llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, '
        '"original_max_position_embeddings": 8192}').encode())
    put(t, "qwen3", llama.replace('"llama"', '"qwen3"').replace('"num_key_value_heads": 2',
        '"num_key_value_heads": 2, "head_dim": 32').encode())
    put(t, "qwen2", llama.replace('"llama"', '"qwen2"').replace('true', 'false').encode())
    put(t, "mistral_sliding", llama.replace('"llama"', '"mistral"').replace(
        '"rope_scaling": null', '"sliding_window": 64').encode())
    put(t, "gpt2", b'{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, '
        b'"n_positions": 128, "n_ctx": 128, "vocab_size": 1000, "n_inner": null, '
        b'"activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, '
        b'"task_specific_params": {"text-generation": {"do_sample": true, "max_length": [50, -1.5e3]}}}')
    put(t, "unknown_type", b'{"model_type": "gpt_neox", "hidden_size": 64}')
    put(t, "truncated", llama[:100].encode())

def main():
    model_files()
    state_files()
    outer_files()
    run_configs()
    shards()
    tokenizer_files()
    vocab_files()
    texts()
    envs()
    flag_lists()
    safetensors_files()
    hf_configs()
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        size = sum(os.path.getsize(os.path.join(CORPUS, target, f)) for f in files)
        print("fuzz/corpus/%s: %d files, %d bytes" % (target, len(files), size))


if __name__ == "__main__":
    main()
