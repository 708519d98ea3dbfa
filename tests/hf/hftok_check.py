"""vkgpt's Hugging Face tokenizers (src/data/hftok.c, hfenc.c) against `tokenizers` itself.

Usage: hftok_check.py HFTOK_TOOL GPT2_DIR WORK_DIR

Builds tokenizer.json files of the families offline: GPT-2's own vocabulary (GPT2_DIR's
encoder.json + vocab.bpe) as a ByteLevel BPE, and BPE models trained here with `tokenizers`'
BpeTrainer in the layouts of Llama 3 (Split with Llama 3's pattern + ByteLevel, ignore_merges,
a TemplateProcessing begin-of-text), Qwen 2 (NFC, Split with Qwen 2's pattern + ByteLevel, merges
written as [a, b] pairs) and Llama 2 / Mistral (SentencePiece-style: Prepend + Replace
normalizers, byte fallback, Replace/ByteFallback/Fuse/Strip decoder; and the newer Metaspace
layout). Each encodes a megabyte of mixed text (scripts, CJK, emoji, digits, whitespace runs,
newlines, added and special tokens embedded, decomposed accents, invalid-looking apostrophes) in
documents of every length; every id must equal tokenizers' encode(doc, add_special_tokens=True),
vkgpt's decoding must equal tokenizers' decode(ids) and, for the byte-level ones without a
normalizer, give the document back byte for byte. Exit 0 when all hold; prints the figures.
"""
import json
import os
import random
import struct
import subprocess
import sys
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is was that for it with as his on be at by had are but from or "
         "have an they which one you were all we her she there would their will when who him "
         "been has more if no out do so can what up said about other into than its time only "
         "could new them man some these then two first may any like now my such make over our "
         "even most me state after also made many did must before back see through way where "
         "Don't I'M you'RE THEY'LL we'd she's it's O'Neil rock'n'roll").split()
SCRIPTS = [
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюя", "αβγδεζηθικλμνξοπρστυφχψω", "אבגדהוזחטיכלמנסעפצקרשת",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "कखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह", "กขคฆงจฉชซฌญฎฏฐ",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长",
    "あいうえおかきくけこさしすせそたちつてとなにぬねのアイウエオカキクケコ", "한국어는대한민국의공용어입니다가나다라마바사",
    "éèêëàâäôöûüçñßøåæœ", "ＡＢＣａｂｃ０１２",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇩🇪", "❤️", "🚀", "🤖", "✨", "🧑🏿‍🔬", "©", "™"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028",
          "\u2003", "\u0085", "\u180e", "\u200b", "\ufeff", "      \n\t  "]
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`") + ["...", "--", "'", "’", "«»", "—"]


def make_text(rng, specials, n_bytes):
    """Documents of mixed text, n_bytes of UTF-8 in all, in a list."""
    docs, total = [], 0
    while total < n_bytes:
        parts = []
        for _ in range(rng.choice([1, 2, 5, 20, 80, 300, 1200])):
            r = rng.random()
            if r < 0.40:
                w = rng.choice(WORDS)
                parts.append(w.capitalize() if rng.random() < 0.15 else w)
            elif r < 0.55:
                s = rng.choice(SCRIPTS)
                parts.append("".join(rng.choice(s) for _ in range(rng.randint(1, 8))))
            elif r < 0.63:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif r < 0.70:
                parts.append(rng.choice(EMOJI))
            elif r < 0.82:
                parts.append(rng.choice(SPACES))
            elif r < 0.92:
                parts.append(rng.choice(PUNCT))
            elif r < 0.95:
                parts.append("e\u0301" if rng.random() < 0.5 else "n\u0303o")  # decomposed
            elif specials:
                parts.append(rng.choice(specials))
            sep = rng.random()
            parts.append(" " if sep < 0.6 else "" if sep < 0.9 else rng.choice(SPACES))
        doc = "".join(parts)
        if rng.random() < 0.1:
            doc = rng.choice(SPACES) + doc
        docs.append(doc)
        total += len(doc.encode())
    return docs


def train(tok, rng, specials, vocab_size, **kw):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  show_progress=False, **kw)
    tok.train_from_iterator(make_text(rng, [], 400_000), trainer=trainer)
    return tok


def gpt2(gpt2_dir, rng):
    tok = Tokenizer(models.BPE.from_file(os.path.join(gpt2_dir, "encoder.json"),
                                         os.path.join(gpt2_dir, "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return tok, {}, ["<|endoftext|>"]


def llama3(rng):
    specials = ["<|begin_of_text|>", "<|end_of_text|>"] + [
        f"<|reserved_special_token_{i}|>" for i in range(6)] + ["<|eot_id|>"]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, rng, specials, 6000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    # Whole words the merges do not reach, as Llama 3's vocabulary has: ignore_merges takes them.
    spec = json.loads(tok.to_str())
    vocab, added = spec["model"]["vocab"], 0
    for doc in make_text(random.Random(5), [], 30_000):
        for piece, _ in tok.pre_tokenizer.pre_tokenize_str(doc):
            if len(piece) > 2 and piece not in vocab and added < 400:
                vocab[piece] = max(vocab.values()) + 1
                added += 1
    tok = Tokenizer.from_str(json.dumps(spec))
    spec["model"]["ignore_merges"] = False
    plain = Tokenizer.from_str(json.dumps(spec))
    probe = make_text(random.Random(7), [], 50_000)
    changed = sum(a.ids != b.ids for a, b in zip(tok.encode_batch(probe), plain.encode_batch(probe)))
    assert changed > 0, "ignore_merges changes nothing: the test would not see it"
    print(f"llama3: {added} whole-word tokens outside the merges; ignore_merges changes "
          f"{changed} of {len(probe)} probe documents")
    tok.add_tokens([AddedToken(" xyzzy", normalized=True, special=False)])
    cfg = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
           "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}
    return tok, cfg, specials + [" xyzzy", "xyzzy"]


def qwen2(rng):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, rng, specials, 5000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, special=True,
                                       normalized=False)])
    cfg = {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": "{{ messages }}"}
    return tok, cfg, specials + ["<mask>"]


def sentencepiece(rng, metaspace):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                 split=True)
    train(tok, rng, ["<unk>", "<s>", "</s>"], 3000, limit_alphabet=200)
    # Llama 2's layout: the 256 <0xNN> byte tokens in the vocabulary at 3..258, the rest after.
    spec = json.loads(tok.to_str())
    old = spec["model"]["vocab"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for t, i in sorted(old.items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    spec["model"]["vocab"] = vocab
    if metaspace:  # Mistral's newer files: Metaspace, no normalizer
        spec["normalizer"] = None
        spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁",
                                 "prepend_scheme": "first", "split": False}
        spec["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                           "split": False}
    else:  # Llama 2's: Prepend + Replace, no pre-tokenizer
        spec["pre_tokenizer"] = None
        tok2 = Tokenizer.from_str(json.dumps(spec))
        tok2.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                normalizers.Replace(" ", "▁")])
        tok2.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                          decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        spec = json.loads(tok2.to_str())
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", 1)])
    # Tokens added later (normalized, not special): found in the normalized text, their content
    # normalized too ("▁<|im_start|>", "▁wor▁ld" with Llama 2's normalizers).
    tok.add_tokens([AddedToken("<|im_start|>", normalized=True, special=False),
                    AddedToken("wor ld", normalized=True, special=False)])
    cfg = {"bos_token": "<s>", "eos_token": "</s>"}
    return tok, cfg, ["<s>", "</s>", "<unk>", "<|im_start|>", " <|im_start|>", "wor ld", " wor ld"]


def run(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"hftok_check: {' '.join(args)} failed:\n{p.stderr}")
    return p.stdout


def check(name, tok, cfg, specials, tool, work, seed, pairs=False, roundtrip=True):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    if pairs:  # tokenizers >= 0.20 writes merges as [a, b]; 0.19 reads only "a b"
        spec = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
        spec["model"]["merges"] = [m.split(" ") for m in spec["model"]["merges"]]
        json.dump(spec, open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8"))
    if cfg:
        json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"))
    info = run(tool, "info", d).strip()
    rng = random.Random(seed)
    docs = make_text(rng, specials, 1_000_000)
    docs += ["", " ", "a", "  hello", "\n", "<s>", "</s> x", "'S'LL", "123456789",
             " ".join(specials), "x" + "".join(specials) + "y", "\u00e9\u0301", "a\u0300\u0301"]
    blob = "\0".join(docs).encode()
    with open(os.path.join(d, "text"), "wb") as f:
        f.write(blob)
    t0 = time.time()
    expect = [e.ids for e in tok.encode_batch(docs, add_special_tokens=True)]
    t_hf = time.time() - t0
    t0 = time.time()
    run(tool, "encode", d, os.path.join(d, "text"), os.path.join(d, "ids"))
    t_vk = time.time() - t0
    raw = open(os.path.join(d, "ids"), "rb").read()
    got, pos = [], 0
    while pos < len(raw):
        (k,) = struct.unpack_from("<i", raw, pos)
        got.append(list(struct.unpack_from(f"<{k}i", raw, pos + 4)))
        pos += 4 + 4 * k
    bad = [i for i, (a, b) in enumerate(zip(got, expect)) if a != b]
    if len(got) != len(expect) or bad:
        i = bad[0] if bad else 0
        a, b = got[i], expect[i]
        j = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
        sys.exit(f"hftok_check: {name}: {len(bad)} of {len(docs)} documents differ; doc {i} "
                 f"{docs[i][:200]!r}: first difference at token {j}: vkgpt {a[j:j + 8]} "
                 f"tokenizers {b[j:j + 8]} ({[tok.id_to_token(x) for x in b[j:j + 8]]})")
    ntok = sum(len(e) for e in expect)
    # decoding: vkgpt's equals tokenizers' decode; byte-level ones give the document back
    flat = [i for e in got for i in e]
    with open(os.path.join(d, "flat"), "wb") as f:
        f.write(struct.pack(f"<{len(flat)}i", *flat))
    run(tool, "decode", d, os.path.join(d, "flat"), os.path.join(d, "dec"))
    dec = open(os.path.join(d, "dec"), "rb").read()
    want = tok.decode(flat, skip_special_tokens=False).encode()
    if dec != want:
        j = next((j for j in range(min(len(dec), len(want))) if dec[j] != want[j]), 0)
        sys.exit(f"hftok_check: {name}: decode differs from tokenizers' at byte {j}: "
                 f"{dec[j - 20:j + 40]!r} vs {want[j - 20:j + 40]!r}")
    rt = "n/a"
    if roundtrip:
        nbos = 1 if info.split()[2] != "bos=-1" else 0
        ids = [i for e in got for i in e[nbos:]]
        with open(os.path.join(d, "flat"), "wb") as f:
            f.write(struct.pack(f"<{len(ids)}i", *ids))
        run(tool, "decode", d, os.path.join(d, "flat"), os.path.join(d, "dec"))
        if open(os.path.join(d, "dec"), "rb").read() != "".join(docs).encode():
            sys.exit(f"hftok_check: {name}: decode(encode(x)) != x")
        rt = "exact"
    print(f"{name}: {info}; {len(blob)} bytes, {len(docs)} documents, {ntok} tokens: every id "
          f"equal; decode equal to tokenizers'; round trip {rt}; vkgpt {t_vk:.2f} s, "
          f"tokenizers {t_hf:.2f} s")


def main():
    tool, gpt2_dir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = random.Random(1234)
    cases = [("gpt2", *gpt2(gpt2_dir, rng), {}),
             ("llama3", *llama3(rng), {}),
             ("qwen2", *qwen2(rng), {"pairs": True, "roundtrip": False}),
             ("llama2", *sentencepiece(rng, False), {"roundtrip": False}),
             ("mistral-metaspace", *sentencepiece(rng, True), {"roundtrip": False})]
    only = os.environ.get("HFTOK_ONLY")
    for k, (name, tok, cfg, specials, opts) in enumerate(cases):
        if not only or only == name:
            check(name, tok, cfg, specials, tool, work, 100 + k, **opts)
    print("hftok_check: all equal")


if __name__ == "__main__":
    main()
