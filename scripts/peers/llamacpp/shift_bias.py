#!/usr/bin/env python3
"""Adds SHIFT to every float32 mlp.gate.e_score_correction_bias of a checkpoint's safetensors, in
place. With SHIFT = -0.9 the biased selection scores (sigmoid + bias) go negative, where HF's 0.0
fill of the masked groups and an engine's -inf fill choose different experts (docs/llama-cpp.md).

usage: shift_bias.py DIR SHIFT
"""
import json
import os
import struct
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, shift = sys.argv[1], float(sys.argv[2])
    n_done = 0
    for f in sorted(x for x in os.listdir(d) if x.endswith(".safetensors")):
        with open(os.path.join(d, f), "r+b") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            hdr = json.loads(fh.read(n))
            for name, e in hdr.items():
                if not name.endswith("e_score_correction_bias"):
                    continue
                if e["dtype"] != "F32":
                    sys.exit(f"{f}: tensor {name}: dtype {e['dtype']}, expected F32")
                a, b = e["data_offsets"]
                fh.seek(8 + n + a)
                v = struct.unpack(f"<{(b - a) // 4}f", fh.read(b - a))
                fh.seek(8 + n + a)
                fh.write(struct.pack(f"<{len(v)}f", *[x + shift for x in v]))
                n_done += 1
    if n_done == 0:
        sys.exit(f"{d}: no e_score_correction_bias tensor found")
    print(f"{d}: shifted {n_done} selection-bias tensors by {shift:g}")


if __name__ == "__main__":
    main()
