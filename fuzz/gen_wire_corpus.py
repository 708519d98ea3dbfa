#!/usr/bin/env python3
"""Seed inputs for fuzz_wire (see vkg__fuzz_wire): one file per kind of network input, built from
the documented wire layout (64-byte little-endian header; job id 1, generation 0, the fuzzing
rank's secret). Usage: fuzz/gen_wire_corpus.py OUTDIR"""
import struct, sys, os

SECRET = b"fuzzing-secret!!"

def hdr(kind, sender, seq=0, segment=0, tag=0, nbytes=0, flags=0, secret=SECRET, job=1, gen=0):
    return struct.pack("<IHBBQIIQIIQ", 0x43474B56, 2, kind, flags, job, gen, sender, seq, segment,
                       tag, nbytes) + secret

def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = {
        "p2p": b"\0" + hdr(7, 0, 0, tag=7, nbytes=16, flags=1) + bytes(range(16)),
        "p2p_other_tag": b"\0" + hdr(7, 2, 0, tag=9, nbytes=4, flags=1) + b"abcd",
        "data": b"\0" + hdr(4, 3, 5, tag=1 | 0xffff << 16, nbytes=8) + b"\0" * 8,
        "data_stale": b"\0" + hdr(4, 3, 2, tag=1, nbytes=4) + b"\0" * 4,
        "credit": b"\0" + hdr(5, 2, 5, segment=3),
        "abort": b"\0" + hdr(6, 0, 5, nbytes=19) + b"loss became NaN \x1b[2J",
        "stall": b"\0" + hdr(8, 2, 5, segment=3),
        "stall_over": b"\0" + hdr(8, 2, 5, segment=0xFFFFFFFF),
        "short_header": b"\0" + hdr(7, 0)[:20],
        "extra_frames": b"\x80" + hdr(7, 0, tag=7, nbytes=1, flags=1) + b"x",
        "hello": b"\x01" + b"\x05" + b"R\x02\0\0\0" + hdr(1, 2, secret=bytes(16))
                 + struct.pack("<II", 4, 2) + b"tcp://127.0.0.1:5555".ljust(256, b"\0")
                 + b"\0" * 41,
        "table": b"\x02" + hdr(2, 0, nbytes=4 * 297 + 16)
                 + b"".join(("ipc:///tmp/r%d" % q).encode().ljust(297, b"\0") for q in range(4))
                 + SECRET,
        "reject": b"\x02" + hdr(3, 0, nbytes=11) + b"not welcome",
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

if __name__ == "__main__":
    main(sys.argv[1])
