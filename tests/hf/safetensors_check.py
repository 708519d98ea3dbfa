#!/usr/bin/env python3
"""vkgpt's safetensors files against the safetensors library itself (ctest safetensors_hf).

Usage: safetensors_check.py TEST_SAFETENSORS_BINARY WORK_DIR

1. The library writes files (safetensors.numpy.save_file for F32, F16 and integers; its raw
   serialize_file with TensorSpec for BF16, which numpy lacks); vkgpt reads them (the binary's
   `dump` mode) and must see the same names, dtypes, shapes, metadata and bytes, and convert
   F16/BF16 to the fp32 bits numpy computes.
2. vkgpt writes a file (the binary's `write` mode: fp32 inputs converted to BF16 and F16, raw
   tensors, ranks 0-4, an empty tensor, a name that needs JSON escapes); the library reads it
   with safe_open(framework="numpy") (deserialize for BF16) and must find the values expected:
   F16 as numpy's own float32 -> float16 rounding, BF16 as round-to-nearest-even done here.
3. Mutated copies of that file: vkgpt must accept exactly those the library accepts.

The library must be installed (scripts/install-deps.sh --test pins it): without it this fails.
"""
import json
import os
import struct
import subprocess
import sys

PINNED = "0.8.0"  # scripts/install-deps.sh installs this version

try:
    import numpy as np
    import safetensors
    from safetensors import TensorSpec, deserialize, safe_open, serialize_file
    from safetensors.numpy import save_file
except ImportError as e:
    sys.exit(f"safetensors_check: FAIL: {e}: install the library with scripts/install-deps.sh "
             f"--test (safetensors=={PINNED} and numpy for this python3)")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


# ---- the inputs both sides compute -------------------------------------------------------------

SPECIALS = [
    0x3f808000, 0x3f818000, 0x3f808001, 0x3f801000, 0x3f803000, 0x477fefff, 0x477ff000,
    0x33000000, 0x33000001, 0x33c00000, 0x387fc000, 0x80000000, 0x7f800000, 0xff800000,
    0x7fc00000, 0x00000001, 0x7f7fffff, 0x3eaaaaab, 0xc0490fdb, 0x00000000,
]


def lcg_bits(n, state):
    out = []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(state >> 32)
    return out, state


def f32(bits, shape):
    return np.array(bits, dtype="<u4").view("<f4").reshape(shape)


def bf16_rne(x):
    """fp32 -> bf16 bits, round to nearest even, written independently of vkgpt's C."""
    out = []
    for u in np.asarray(x, dtype="<f4").reshape(-1).view("<u4").tolist():
        if (u & 0x7fffffff) > 0x7f800000:
            out.append(0x7fc0 | (u >> 16) & 0x8000)  # some NaN: compared as "a NaN"
            continue
        hi, lo = u >> 16, u & 0xffff
        if lo > 0x8000 or (lo == 0x8000 and hi & 1):
            hi += 1
        out.append(hi & 0xffff)
    return np.array(out, dtype="<u2").reshape(np.shape(x))


def as_f32_bits(dtype, data):
    """The fp32 bit patterns of a tensor's stored bytes."""
    if dtype == "F32":
        return np.frombuffer(data, dtype="<u4")
    if dtype == "F16":
        return np.frombuffer(data, dtype="<f2").astype("<f4").view("<u4")
    return np.frombuffer(data, dtype="<u2").astype("<u4") << 16


def same_bits(dtype, got, want):
    """Bitwise equality, except that a NaN only has to be some NaN."""
    size = {"F32": 4, "BF16": 2, "F16": 2}.get(dtype)
    if size is None or len(got) != len(want):
        return got == want
    g = np.frombuffer(got, dtype=f"<u{size}").astype(np.uint64)
    w = np.frombuffer(want, dtype=f"<u{size}").astype(np.uint64)
    exp, man = {4: (0x7f800000, 0x7fffff), 2: (0x7c00, 0x3ff) if dtype == "F16" else (0x7f80, 0x7f)}[size]
    nan_w = ((w & exp) == exp) & ((w & man) != 0)
    nan_g = ((g & exp) == exp) & ((g & man) != 0)
    return bool(np.all(np.where(nan_w, nan_g, g == w)))


# ---- vkgpt's view of a file --------------------------------------------------------------------


def dump(binary, path):
    """(ok, metadata, {name: (dtype, shape, raw bytes, fp32 bytes or None)}, names in data order)."""
    r = subprocess.run([binary, "dump", path], capture_output=True, text=True)
    meta, tensors, order = {}, {}, []
    for line in r.stdout.splitlines():
        f = line.split(" ")
        if f[0] == "M":
            meta[bytes.fromhex(f[1]).decode()] = bytes.fromhex(f[2]).decode() if f[2] != "-" else ""
        elif f[0] == "T":
            name = bytes.fromhex(f[1]).decode() if f[1] != "-" else ""
            shape = [] if f[3] == "-" else [int(d) for d in f[3].split(",")]
            raw = b"" if f[4] == "-" else bytes.fromhex(f[4])
            fp = b"" if f[5] == "-" else bytes.fromhex(f[5])  # "-": empty, or not converted
            tensors[name] = (f[2], shape, raw, fp)
            order.append(name)
    return r.returncode == 0, meta, tensors, order, r.stdout.strip().splitlines()[-1:] or [""]


def library_view(path):
    with open(path, "rb") as fh:
        blob = fh.read()
    out = {}
    for name, t in deserialize(blob):
        out[name] = (t["dtype"], list(t["shape"]), bytes(t["data"]))
    with safe_open(path, framework="numpy") as fh:
        meta = fh.metadata() or {}
    return meta, out


# ---- 1. the library writes, vkgpt reads --------------------------------------------------------


def library_writes(binary, work):
    bits, state = lcg_bits(64, 7)
    sp = f32(SPECIALS, (len(SPECIALS),))
    with np.errstate(all="ignore"):  # f16 overflows to infinity, as it should
        tensors = {
            "scalar": f32(bits[:1], ()),
            "specials.f32": sp,
            "specials.f16": sp.astype(np.float16),
            "r2": f32(bits[1:16], (3, 5)),
            "r3.f16": f32(bits[16:40], (2, 3, 4)).astype(np.float16),
            "r4": f32(bits[40:52], (2, 1, 3, 2)),
            "ids": np.array([1, -2, 2**63 - 1], dtype="<i8"),
            "bytes": np.arange(5, dtype=np.uint8),
            "empty": np.zeros((0, 4), dtype=np.float32),
            "n\u00e4me \"q\"\\/": f32(bits[52:53], (1,)),
        }
    meta = {"format": "np", "note": "\u00fc \"q\"\n"}
    path = os.path.join(work, "library_numpy.safetensors")
    save_file(tensors, path, metadata=meta)
    bf = {
        "specials.bf16": bf16_rne(sp),
        "r3": bf16_rne(f32(bits[16:40], (2, 3, 4))),
        "scalar.bf16": bf16_rne(f32(bits[:1], ())),
    }
    path_bf = os.path.join(work, "library_bf16.safetensors")
    specs = {k: TensorSpec(dtype="bfloat16", shape=list(v.shape), data_ptr=v.ctypes.data,
                           data_len=v.nbytes) for k, v in bf.items()}
    serialize_file(specs, path_bf, metadata=None)
    for p in (path, path_bf):
        lib_meta, lib = library_view(p)
        ok, got_meta, got, order, last = dump(binary, p)
        name = os.path.basename(p)
        check(ok, f"{name}: vkgpt refused a file the library wrote: {last[0]}")
        if not ok:
            continue
        check(got_meta == lib_meta, f"{name}: metadata {got_meta} != library's {lib_meta}")
        check(sorted(got) == sorted(lib), f"{name}: tensors {sorted(got)} != {sorted(lib)}")
        for t, (dtype, shape, data) in lib.items():
            if t not in got:
                continue
            gd, gs, graw, gf = got[t]
            check(gd == dtype and gs == shape, f"{name}: {t!r}: {gd} {gs} != {dtype} {shape}")
            check(graw == data, f"{name}: {t!r}: raw bytes differ")
            if dtype in ("F32", "F16", "BF16"):
                want = as_f32_bits(dtype, data).tobytes()
                check(gf == want, f"{name}: {t!r}: fp32 conversion differs from numpy's")
        print(f"library -> vkgpt: {name}: {len(lib)} tensors, {len(lib_meta)} metadata, checked")


# ---- 2. vkgpt writes, the library reads --------------------------------------------------------


def vkgpt_expected():
    """What the binary's write mode holds: {name: (dtype, shape, bytes)} in order, metadata."""
    bits, _ = lcg_bits(52, 38)
    sc = f32(bits[:1], ())
    sp = f32(SPECIALS, (len(SPECIALS),))
    r2 = f32(bits[1:16], (3, 5))
    r3 = f32(bits[16:40], (2, 3, 4))
    r4 = f32(bits[40:52], (2, 1, 3, 2))
    with np.errstate(all="ignore"):
        h = lambda x: x.astype("<f2").tobytes()  # numpy's own rounding
        t = [
            ("scalar", "F32", [], sc.tobytes()),
            ("specials.f32", "F32", [len(SPECIALS)], sp.tobytes()),
            ("specials.bf16", "BF16", [len(SPECIALS)], bf16_rne(sp).tobytes()),
            ("specials.f16", "F16", [len(SPECIALS)], h(sp)),
            ("r2", "F32", [3, 5], r2.tobytes()),
            ("r3", "BF16", [2, 3, 4], bf16_rne(r3).tobytes()),
            ("r4", "F16", [2, 1, 3, 2], h(r4)),
            ("empty", "F16", [0, 4], b""),
            ("ids", "I64", [3], np.array([1, -2, 2**63 - 1], dtype="<i8").tobytes()),
            ("raw.bf16", "BF16", [2], np.array([0x3f80, 0xc000], dtype="<u2").tobytes()),
            ("n\u00e4me \"q\"\\/", "F32", [1], sc.reshape(1).tobytes()),
        ]
    return t, {"format": "pt", "note": "a \"quoted\" \u00fc\n"}


def vkgpt_writes(binary, path):
    r = subprocess.run([binary, "write", path], capture_output=True, text=True)
    check(r.returncode == 0, f"vkgpt write failed: {r.stderr.strip()}")
    if r.returncode:
        return
    with open(path, "rb") as fh:
        blob = fh.read()
    (n,) = struct.unpack("<Q", blob[:8])
    check(n % 8 == 0 and blob[8:9] == b"{", f"header of {n} bytes: not padded to 8 or no '{{'")
    header = json.loads(blob[8:8 + n])
    want, want_meta = vkgpt_expected()
    begins = [header[name]["data_offsets"][0] for name, _, _, _ in want]
    check(begins == sorted(begins), "tensors not stored in the order given")
    lib_meta, lib = library_view(path)
    check(lib_meta == want_meta, f"metadata {lib_meta} != {want_meta}")
    check(sorted(lib) == sorted(w[0] for w in want), f"tensors {sorted(lib)}")
    with safe_open(path, framework="numpy") as fh:
        for name, dtype, shape, data in want:
            if name not in lib:
                continue
            ld, ls, lraw = lib[name]
            check(ld == dtype and ls == shape, f"{name!r}: library sees {ld} {ls}, want {dtype} {shape}")
            check(same_bits(dtype, lraw, data), f"{name!r}: library reads other bits")
            if dtype != "BF16":  # numpy has no bfloat16: deserialize above read those
                arr = fh.get_tensor(name)
                check(list(arr.shape) == shape and same_bits(dtype, arr.astype(arr.dtype.newbyteorder("<")).tobytes(), data),
                      f"{name!r}: safe_open(numpy) reads other values")
    print(f"vkgpt -> library: {len(want)} tensors, {len(want_meta)} metadata, checked")


# ---- 3. malformed copies: both refuse or both accept -------------------------------------------


def build(header, data, pad=True):
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def mutants(blob):
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    names = [k for k in header if k != "__metadata__"]
    first = min(names, key=lambda k: header[k]["data_offsets"][0])
    second = sorted(names, key=lambda k: header[k]["data_offsets"][0])[1]

    def edit(fn):
        h = json.loads(json.dumps(header))
        fn(h)
        return h

    def shift(h, k, d):
        h[k]["data_offsets"] = [h[k]["data_offsets"][0] + d, h[k]["data_offsets"][1] + d]

    yield "as written", blob
    yield "no padding", build(header, data, pad=False)
    yield "keys reversed", build(dict(reversed(list(header.items()))), data)
    yield "unknown field skipped", build(edit(lambda h: h[first].update(extra=[1.5, {"a": None}])), data)
    yield "trailing byte", blob + b"\0"
    yield "last byte cut", blob[:-1]
    yield "header size past the file", struct.pack("<Q", len(blob)) + blob[8:]
    yield "header size absurd", struct.pack("<Q", 1 << 40) + blob[8:]
    yield "header size into the data", struct.pack("<Q", n + 8) + blob[8:]
    yield "gap", build(edit(lambda h: shift(h, second, 1)), data + b"\0")
    yield "overlap", build(edit(lambda h: shift(h, second, -1)), data)
    yield "size mismatch", build(edit(lambda h: h[first]["data_offsets"].__setitem__(1, h[first]["data_offsets"][1] + 1)), data)
    yield "unknown dtype", build(edit(lambda h: h[first].update(dtype="F128")), data)
    yield "negative dim", build(edit(lambda h: h[second].update(shape=[-1] + h[second]["shape"][1:])), data)
    yield "metadata not a string", build(edit(lambda h: h["__metadata__"].update(n=1)), data)
    yield "no dtype", build(edit(lambda h: h[first].pop("dtype")), data)
    yield "not JSON", struct.pack("<Q", 8) + b"{\"a\":1 " + data
    yield "not UTF-8", build(header, data)[:8] + b"{\"\xff" + build(header, data)[11:]
    yield "metadata null", build(edit(lambda h: h.update(__metadata__=None)), data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    entry = json.dumps({first: header[first]}, separators=(",", ":"), ensure_ascii=False).encode()
    twice = b"{" + entry[1:-1] + b"," + text[1:]  # the first tensor's entry once more, the same
    yield "duplicate name", struct.pack("<Q", len(twice)) + twice + data
    yield "space before '{'", struct.pack("<Q", n + 1) + b" " + blob[8:]


# Where vkgpt is stricter than the library on purpose (docs/FORMATS.md): the format's README
# disallows duplicate names (the library keeps one of them) and says the header MUST begin with
# '{' (the library skips leading spaces).
STRICTER = {"duplicate name", "space before '{'"}


def agree(binary, work, path):
    with open(path, "rb") as fh:
        blob = fh.read()
    for what, b in mutants(blob):
        p = os.path.join(work, "mutant.safetensors")
        with open(p, "wb") as fh:
            fh.write(b)
        try:
            deserialize(b)
            lib_ok = True
        except Exception:  # SafetensorError, or serde's errors surfaced as others
            lib_ok = False
        ok, _, _, _, last = dump(binary, p)
        if what in STRICTER:
            check(not ok, f"mutant '{what}': vkgpt accepts it (library: {lib_ok})")
            print(f"mutant '{what}': vkgpt refuses ({last[0]}), library {'accepts' if lib_ok else 'refuses'}")
            continue
        check(ok == lib_ok, f"mutant '{what}': library {'accepts' if lib_ok else 'refuses'} it, "
                            f"vkgpt {'accepts' if ok else 'refuses'} ({last[0]})")
        if ok == lib_ok:
            print(f"mutant '{what}': both {'accept' if ok else 'refuse'}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    print(f"safetensors {safetensors.__version__} (pinned {PINNED}), numpy {np.__version__}")
    library_writes(binary, work)
    path = os.path.join(work, "vkgpt.safetensors")
    vkgpt_writes(binary, path)
    if os.path.exists(path):
        agree(binary, work, path)
    print(f"safetensors_check: {'FAIL' if failures else 'ok'} ({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
