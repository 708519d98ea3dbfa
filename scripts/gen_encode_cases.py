#!/usr/bin/env python3
"""Expected GPT-2 encodings for tests/data/gpt2_encode_cases.json, from a reference encoder.

A small byte-level BPE encoder written from the published GPT-2 algorithm, independent of vkgpt's
C encoder (nothing here calls or reads vkgpt):
  1. pre-tokenization with GPT-2's pattern
       's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
     run by Python's backtracking regex engine (re), with \\p{L} and \\p{N} spelled out as
     character classes from unicodedata's general categories and \\s as Unicode's White_Space
     property (what the third-party `regex` module that GPT-2's encoder.py uses matches; when
     that module is installed every split is also checked against it);
  2. each piece's UTF-8 bytes mapped to GPT-2's printable stand-in characters (bytes_to_unicode);
  3. the lowest-ranked adjacent pair from vocab.bpe merged everywhere, repeatedly, until no pair
     has a rank; the resulting strings looked up in encoder.json.
Bytes that are not valid UTF-8 are decoded with Python's surrogateescape handler: each becomes
one lone surrogate, which is neither a letter, a number nor a space, i.e. punctuation, one byte
each. That is the behaviour vkgpt documents for invalid input (src/data/unicode.h); GPT-2's own
encoder takes only valid text.

Usage:
  python3 scripts/gen_encode_cases.py [--vocab-dir data/gpt2] [--out FILE] [--check CASES.json]
--check FILE: also encode every {"text", "tokens"} case of FILE (for example encodings made by
another GPT-2 implementation) and exit 1 unless all are reproduced. Writes --out (default:
tests/data/gpt2_encode_cases.json) only when every check passes. Needs only the standard library;
the file depends on the Unicode version of Python's unicodedata only through the characters the
cases use, all of which are older than Unicode 13.
"""

import argparse
import json
import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Unicode White_Space (PropList.txt).
WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]


def ranges_where(pred):
    """Code point ranges [(lo, hi)] over all of Unicode where pred(category) holds."""
    out, start = [], None
    for cp in range(0x110000 + 1):
        ok = cp < 0x110000 and pred(unicodedata.category(chr(cp)))
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            out.append((start, cp - 1))
            start = None
    return out


def char_class(ranges):
    return "".join("\\U%08x" % lo if lo == hi else "\\U%08x-\\U%08x" % (lo, hi)
                   for lo, hi in ranges)


def gpt2_pattern():
    letters = char_class(ranges_where(lambda c: c.startswith("L")))
    numbers = char_class(ranges_where(lambda c: c.startswith("N")))
    space = char_class(WHITE_SPACE)
    return re.compile(
        "'s|'t|'re|'ve|'m|'ll|'d"
        "| ?[%s]+| ?[%s]+| ?[^%s%s%s]+"
        "|[%s]+(?![^%s])|[%s]+" % (letters, numbers, space, letters, numbers, space, space,
                                    space))


def bytes_to_unicode():
    """GPT-2's byte -> printable character table: printable Latin-1 bytes stand for themselves,
    the other 68 bytes take the characters 256, 257, ... in byte order."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
            list(range(ord("\xae"), ord("\xff") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Reference:
    def __init__(self, vocab_dir):
        with open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(vocab_dir, "vocab.bpe"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(line.split()) for line in lines[1:] if line.strip()]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.byte_char = bytes_to_unicode()
        self.pattern = gpt2_pattern()
        try:
            import regex  # the module GPT-2's encoder.py uses; optional cross-check
            self.openai_pattern = regex.compile(
                r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
        except ImportError:
            self.openai_pattern = None

    def split(self, data):
        text = data.decode("utf-8", "surrogateescape")
        pieces = self.pattern.findall(text)
        assert "".join(pieces) == text, "the pieces must tile the text"
        if self.openai_pattern is not None:
            other = self.openai_pattern.findall(text)
            if other != pieces:
                raise SystemExit("split of %r differs from the regex module's: %r vs %r" %
                                 (data, pieces, other))
        return [p.encode("utf-8", "surrogateescape") for p in pieces]

    def bpe(self, word):
        """Merge the lowest-ranked adjacent pair everywhere until none has a rank."""
        word = list(word)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return word

    def decode(self, ids):
        char_byte = {c: b for b, c in self.byte_char.items()}
        token = {i: t for t, i in self.encoder.items()}
        return bytes(char_byte[c] for i in ids for c in token[i])

    def encode(self, data):
        ids = []
        for piece in self.split(data):
            word = "".join(self.byte_char[b] for b in piece)
            ids.extend(self.encoder[token] for token in self.bpe(word))
        return ids


# (name, bytes): what each case exercises, then its exact input.
CASES = [
    ("ascii sentence", b"Hello, World! This is a plain ASCII sentence."),
    ("ascii punctuation", b"~!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/`"),
    ("contractions", b"it's don't we're they've I'm you'll he'd"),
    ("upper-case contractions are not contractions", b"IT'S DON'T WE'RE THEY'VE I'M YOU'LL HE'D"),
    ("apostrophes", b"'s's ''ll 'd'd rock'n'roll dogs' 'tis '"),
    ("numbers", b"0 1 12 123 1234 12345 3.14159 -42 +7 1e-8 0x1F 1,000,000 2026-11-24"),
    ("letters and digits", b"abc123def 4th 21st A1B2C3"),
    ("space runs", b"a  b   c    d\t\te  \t f"),
    ("leading and trailing spaces", b"   start and end   "),
    ("only spaces", b"     "),
    ("single space", b" "),
    ("newlines", b"line one\nline two\n\nline four\r\nwindows\r\n\n\n"),
    ("tabs and newlines", b"\t\n \n\t x\n \n"),
    ("accented Latin", "café naïve résumé Zürich São Paulo Ångström œuvre façade".encode()),
    ("Greek and Cyrillic", "Ελληνικά και кириллица".encode()),
    ("CJK", "日本語のテキスト 中文字符 한국어".encode()),
    ("emoji", "🙂🚀 👍🏽 👨\u200d👩\u200d👧 🇫🇷!".encode()),
    ("combining marks", "e\u0301t\u00e9 n\u0303o".encode()),
    ("Unicode spaces", "a\u00a0b\u2003c\u3000d x\u0085y z\u2028w".encode()),
    ("not spaces", "a\ufeffb\u200bc\x1cd\x1fe".encode()),
    ("Unicode numbers", "x² ½ Ⅻ ٣٤ १२".encode()),
    ("dashes and quotes", "a — b – c “d” ‘e’ … «f»".encode()),
    ("end-of-text is text", b"<|endoftext|> is just text"),
    ("punctuation runs", b"...!!!??? --- *** ~~~"),
    ("long word", b"pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("control bytes", b"\x00\x01a\x1f\x7f b"),
    ("one letter", b"a"),
    ("empty", b""),
    ("invalid bytes", b"abc\xff\xfe def"),
    ("invalid continuation", b"\xc3\x28 ok"),
    ("truncated sequence at the end", b"caf\xc3"),
    ("truncated three-byte sequence", b"x\xe2\x82 y"),
    ("encoded surrogate", b"a\xed\xa0\x80b"),
    ("overlong encoding", b"\xc0\xaf\xe0\x80\xaf"),
    ("above U+10FFFF", b"\xf4\x90\x80\x80z"),
    ("stray continuation bytes", b" \x80\x80 x\xbf"),
    ("invalid between letters and spaces", b"word\xffword \xfe \xfdx"),
]


def load_check(path):
    with open(path, encoding="utf-8") as f:
        return [(c["text"].encode("utf-8"), c["tokens"]) for c in json.load(f)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab-dir", default=os.path.join(ROOT, "data", "gpt2"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "gpt2_encode_cases.json"))
    ap.add_argument("--check", action="append", default=[])
    args = ap.parse_args()

    ref = Reference(args.vocab_dir)
    bad = 0
    for path in args.check:
        cases = load_check(path)
        for data, want in cases:
            got = ref.encode(data)
            if got != want:
                bad += 1
                print("%s: %r: got %s, want %s" % (path, data, got, want), file=sys.stderr)
        print("%s: %d of %d cases reproduced" % (path, len(cases) - bad, len(cases)))
    if bad:
        return 1
    if ref.openai_pattern is None:
        print("note: the regex module is not installed; splits were not cross-checked with it")

    out = []
    for name, data in CASES:
        case = {"name": name}
        try:
            case["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            case["hex"] = data.hex()
        case["tokens"] = ref.encode(data)
        assert ref.decode(case["tokens"]) == data, "GPT-2's BPE is lossless"
        out.append(case)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in out))
        f.write("\n]\n")
    print("%s: %d cases" % (os.path.relpath(args.out), len(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
