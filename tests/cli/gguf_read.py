"""A GGUF v3 reader for the export tests (written from the format's description, no llama.cpp code):
read(path) -> (metadata {key: value}, tensors {name: (ggml type, ne innermost first, raw bytes)}),
and the dequantization of the block types the exporter writes, Q8_0 / Q4_0 (32 weights per block:
an fp16 scale d, then int8 q (x = q d) or packed nibbles (x = (q - 8) d, byte j = weight j low,
weight j + 16 high)), and the quantizers as llama.cpp's reference rule states them, in float32
arithmetic (each double result rounded to float32; exact for +, -, *, / of float32 operands)."""
import math
import struct

F32, F16, Q4_0, Q8_0, BF16 = 0, 1, 2, 8, 30
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _value(d, o, t):
    if t == 8:
        n = struct.unpack_from("<Q", d, o)[0]
        return d[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n
    if t == 9:
        et, n = struct.unpack_from("<IQ", d, o)
        o += 12
        out = []
        for _ in range(n):
            v, o = _value(d, o, et)
            out.append(v)
        return out, o
    fmt = SCALARS[t]
    return struct.unpack_from(fmt, d, o)[0], o + struct.calcsize(fmt)


def row_bytes(t, n):
    return {F32: 4 * n, F16: 2 * n, BF16: 2 * n, Q8_0: n // 32 * 34, Q4_0: n // 32 * 18}[t]


def read(path):
    d = open(path, "rb").read()
    magic, ver, n_t, n_kv = struct.unpack_from("<4sIQQ", d)
    assert magic == b"GGUF" and ver == 3, (magic, ver)
    o, meta = 24, {}
    for _ in range(n_kv):
        k, o = _value(d, o, 8)
        t = struct.unpack_from("<I", d, o)[0]
        meta[k], o = _value(d, o + 4, t)
    infos = []
    for _ in range(n_t):
        name, o = _value(d, o, 8)
        nd = struct.unpack_from("<I", d, o)[0]
        ne = list(struct.unpack_from("<%dQ" % nd, d, o + 4))
        t, off = struct.unpack_from("<IQ", d, o + 4 + 8 * nd)
        o += 4 + 8 * nd + 12
        infos.append((name, t, ne, off))
    align = meta.get("general.alignment", 32)
    base = (o + align - 1) // align * align
    tensors = {}
    for name, t, ne, off in infos:
        rows = math.prod(ne) // ne[0]
        tensors[name] = (t, ne, d[base + off:base + off + rows * row_bytes(t, ne[0])])
    return meta, tensors


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def fp16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def floats(t, raw):
    if t == F32:
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if t == F16:
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    if t == BF16:
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    out = []
    bs = 34 if t == Q8_0 else 18
    for b in range(0, len(raw), bs):
        dd = struct.unpack_from("<e", raw, b)[0]
        if t == Q8_0:
            out += [q * dd for q in struct.unpack_from("<32b", raw, b + 2)]
        else:
            qs = raw[b + 2:b + 18]
            out += [((q & 15) - 8) * dd for q in qs] + [((q >> 4) - 8) * dd for q in qs]
    return out


def quant_q8_0(x):
    out = bytearray()
    for b in range(0, len(x), 32):
        blk = x[b:b + 32]
        amax = max(abs(v) for v in blk)
        d = f32(amax / 127.0)
        inv = f32(1.0 / d) if d else 0.0
        out += struct.pack("<H", fp16_bits(d))
        for v in blk:
            p = f32(v * inv)  # round half away from zero (roundf)
            out += struct.pack("<b", int(math.copysign(math.floor(abs(p) + 0.5), p)))
    return bytes(out)


def quant_q4_0(x):
    out = bytearray()
    for b in range(0, len(x), 32):
        blk = x[b:b + 32]
        amax, m = 0.0, 0.0
        for v in blk:  # the first element of largest magnitude, with its sign
            if abs(v) > amax:
                amax, m = abs(v), v
        d = f32(m / -8.0)
        inv = f32(1.0 / d) if d else 0.0
        out += struct.pack("<H", fp16_bits(d))
        q = [min(15, int(f32(f32(v * inv) + 8.5))) for v in blk]  # int() truncates toward zero
        out += bytes(q[j] | q[j + 16] << 4 for j in range(16))
    return bytes(out)
