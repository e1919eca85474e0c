#!/usr/bin/python3
"""Known answers for the kernel cache's hash and file format, computed independently of the C code.

SipHash-2-4 with 128-bit output is re-implemented here from its specification (Aumasson and
Bernstein, "SipHash: a fast short-input PRF", and the reference's 128-bit variant: v1 ^= 0xee at
initialisation, v2 ^= 0xee before finalisation, v1 ^= 0xdd before the second half). The
implementation is first checked against the 64 published vectors of the reference distribution
(vectors_sip128: key 00..0f, message 00..len-1), which this script also emits for the C test. The
cache entry layout is the one documented in runtime/cache.h.

Writes tests/pool/cache-vectors.h. Run from anywhere: /usr/bin/python3 tests/pool/gen-cache-vectors.py
Uses only the standard library (no numpy).
"""
import os
import platform
import struct

MASK = (1 << 64) - 1

# vectors_sip128 from the SipHash reference distribution (github.com/veorq/SipHash, vectors.h).
PUBLISHED = """
a3817f04ba25a8e66df67214c7550293 da87c1d86b99af44347659119b22fc45 8177228da4a45dc7fca38bdef60affe4
9c70b60c5267a94e5f33b6b02985ed51 f88164c12d9c8faf7d0f6e7c7bcd5579 1368875980776f8854527a07690e9627
14eeca338b208613485ea0308fd7a15e a1f1ebbed8dbc153c0b84aa61ff08239 3b62a9ba6258f5610f83e264f31497b4
264499060ad9baabc47f8b02bb6d71ed 00110dc378146956c95447d3f3d0fbba 0151c568386b6677a2b4dc6f81e5dc18
d626b266905ef35882634df68532c125 9869e247e9c08b10d029934fc4b952f7 31fcefac66d7de9c7ec7485fe4494902
5493e99933b0a8117e08ec0f97cfc3d9 6ee2a4ca67b054bbfd3315bf85230577 473d06e8738db89854c066c47ae47740
a426e5e423bf4885294da481feaef723 78017731cf65fab074d5208952512eb1 9e25fc833f2290733e9344a5e83839eb
568e495abe525a218a2214cd3e071d12 4a29b54552d16b9a469c10528eff0aae c9d184ddd5a9f5e0cf8ce29a9abf691c
2db479ae78bd50d8882a8a178a6132ad 8ece5f042d5e447b5051b9eacb8d8f6f 9c0b53b4b3c307e87eaee08678141f66
abf248af69a6eae4bfd3eb2f129eeb94 0664da1668574b88b935f3027358aef4 aa4b9dc4bf337de90cd4fd3c467c6ab7
ea5c7f471faf6bde2b1ad7d4686d2287 2939b0183223fafc1723de4f52c43d35 7c3956ca5eeafc3e363e9d556546eb68
77c6077146f01c32b6b69d5f4ea9ffcf 37a6986cb8847edf0925f0f1309b54de a705f0e69da9a8f907241a2e923c8cc8
3dc47d1f29c448461e9e76ed904f6711 0d62bf01e6fc0e1a0d3c4751c5d3692b 8c03468bca7c669ee4fd5e084bbee7b5
528a5bb93baf2c9c4473cce5d0d22bd9 df6a301e95c95dad97ae0cc8c6913bd8 801189902c857f39e73591285e70b6db
e617346ac9c231bb3650ae34ccca0c5b 27d93437efb721aa401821dcec5adf89 89237d9ded9c5e78d8b1c9b166cc7342
4a6d8091bf5e7d651189fa94a250b14c 0e33f96055e7ae893ffc0e3dcf492902 e61c432b720b19d18ec8d84bdc63151b
f7e5aef549f782cf379055a608269b16 438d030fd0b7a54fa837f2ad201a6403 a590d3ee4fbf04e3247e0d27f286423f
5fe2c1a172fe93c4b15cd37caef9f538 2c97325cbd06b36eb2133dd08b3a017c 92c814227a6bca949ff0659f002ad39e
dce850110bd8328cfbd50841d6911d87 67f14984c7da791248e32bb5922583da 1938f2cf72d54ee97e94166fa91d2a36
74481e9646ed49fe0f6224301604698e 57fca5de98a9d6d8006438d0583d8a1d 9fecde1cefdc1cbed4763674d9575359
e3040c00eb28f15366ca73cbd872e740 7697009a6a831dfecca91c5993670f7a 5853542321f567a005d547a4f04759bd
5150d1772f50834a503e069a973fbd7c
""".split()

HASH_KEY = b"nitrix-kcache-k1"
SUM_KEY = b"nitrix-kcache-c1"


def rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK


def sipround(v):
    v0, v1, v2, v3 = v
    v0 = (v0 + v1) & MASK
    v1 = rotl(v1, 13) ^ v0
    v0 = rotl(v0, 32)
    v2 = (v2 + v3) & MASK
    v3 = rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & MASK
    v3 = rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & MASK
    v1 = rotl(v1, 17) ^ v2
    v2 = rotl(v2, 32)
    return [v0, v1, v2, v3]


def siphash128(key, msg):
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D ^ 0xEE,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    # The last word carries the remaining bytes and the length modulo 256 in its top byte.
    whole = len(msg) - len(msg) % 8
    words = [int.from_bytes(msg[i:i + 8], "little") for i in range(0, whole, 8)]
    words.append(int.from_bytes(msg[whole:], "little") | ((len(msg) & 0xFF) << 56))
    for m in words:
        v[3] ^= m
        v = sipround(sipround(v))
        v[0] ^= m
    v[2] ^= 0xEE
    for _ in range(4):
        v = sipround(v)
    h0 = v[0] ^ v[1] ^ v[2] ^ v[3]
    v[1] ^= 0xDD
    for _ in range(4):
        v = sipround(v)
    h1 = v[0] ^ v[1] ^ v[2] ^ v[3]
    return struct.pack("<QQ", h0, h1)


def pattern(n):
    return bytes((i * 31 + 7) & 0xFF for i in range(n))


def entry_file(blob, payload):
    """The bytes of a cache entry as runtime/cache.h documents them."""
    key_hash = siphash128(HASH_KEY, blob)
    head = b"NXKCACHE" + struct.pack("<II", 1, 64) + key_hash + struct.pack("<QQ", len(blob), len(payload))
    assert len(head) == 48
    checksum = siphash128(SUM_KEY, head + blob + payload)
    return head + checksum + blob + payload


def blob_field(name, value):
    """One key-blob field as runtime/cache.h documents it."""
    return struct.pack("<I", len(name)) + name + struct.pack("<Q", len(value)) + value


BLOB_VERSION = b"0.1.0"
BLOB_FIELDS = [(b"ir", b"kernel(v1){out[i]=max(a[i]+b[i],out[i])}"), (b"dtype", b"f32"),
               (b"rank", struct.pack("<q", 2)), (b"shape", struct.pack("<qq", 64, -1)),
               (b"empty", b""), (b"backend", b"cpu")]


def c_string(b):
    return '"' + "".join(c if c.isalnum() or c in " .,:;=_-[]|/()+" else "\\%03o" % ord(c)
                         for c in b.decode("latin-1")) + '"'


def main():
    ref_key = bytes(range(16))
    for n, want in enumerate(PUBLISHED):
        got = siphash128(ref_key, bytes(range(n))).hex()
        assert got == want, "length %d: %s != published %s" % (n, got, want)

    named = [b"", b"a", b"abc", b"nitrix",
             b"kernel(v1){out[i]=max(a[i]+b[i],out[i])}|dtypes=f32,f32|shapes=[64,64],[64,64]|"
             b"backend=cpu|target=znver3 +avx2 +avx512f +fma|llvm=14.0.6|nitrix=0.1.0|driver=canonical"]
    lines = []
    lines.append("/* Generated by tests/pool/gen-cache-vectors.py with Python %s. Do not edit. */"
                 % platform.python_version())
    lines.append("#ifndef NX_CACHE_VECTORS_H\n#define NX_CACHE_VECTORS_H\n")
    lines.append("/* SipHash-2-4-128, key 00..0f, message 00..n-1 (the published reference vectors). */")
    lines.append("static const char *const kat_published[%d] = {" % len(PUBLISHED))
    lines += ['    "%s",' % h for h in PUBLISHED]
    lines.append("};\n")
    lines.append("/* Under NX_CACHE_HASH_KEY, message pattern(n): byte i = (31 i + 7) mod 256. */")
    lens = list(range(0, 131)) + [255, 256, 257, 4095, 4096, 4097, 100000]
    lines.append("static const struct { size_t len; const char *hex; } kat_pattern[] = {")
    lines += ['    {%d, "%s"},' % (n, siphash128(HASH_KEY, pattern(n)).hex()) for n in lens]
    lines.append("};\n")
    lines.append("/* Under NX_CACHE_HASH_KEY, these strings (without the terminator). */")
    lines.append("static const struct { const char *msg; const char *hex; } kat_named[] = {")
    lines += ["    {%s, \"%s\"}," % (c_string(m), siphash128(HASH_KEY, m).hex()) for m in named]
    lines.append("};\n")
    lines.append("/* Under NX_CACHE_SUM_KEY, pattern(n). */")
    lines.append("static const struct { size_t len; const char *hex; } kat_sum[] = {")
    lines += ['    {%d, "%s"},' % (n, siphash128(SUM_KEY, pattern(n)).hex()) for n in (0, 7, 64, 1000)]
    lines.append("};\n")
    blob, payload = named[-1], pattern(300)
    data = entry_file(blob, payload)
    lines.append("/* The whole entry file for key blob kat_named[%d].msg and payload pattern(300), and")
    lines[-1] %= (len(named) - 1)
    lines.append(" * its name. */")
    lines.append('static const char kat_entry_name[] = "%s.nxk";' % siphash128(HASH_KEY, blob).hex())
    lines.append("static const unsigned char kat_entry[%d] = {" % len(data))
    for i in range(0, len(data), 16):
        lines.append("    " + " ".join("0x%02x," % b for b in data[i:i + 16]))
    lines.append("};\n")
    tail = b"".join(blob_field(n, v) for n, v in BLOB_FIELDS)
    whole = blob_field(b"nitrix", BLOB_VERSION) + tail
    lines.append("/* A key blob built from fields: ir, dtype, rank (i64 2), shape (i64 64, -1), empty,")
    lines.append(" * backend (see BLOB_FIELDS in the generator); the bytes after the leading nitrix")
    lines.append(" * field, and the hash of the whole blob when that field is kat_blob_version. */")
    lines.append('static const char kat_blob_version[] = "%s";' % BLOB_VERSION.decode())
    lines.append('static const char kat_blob_hash[] = "%s";' % siphash128(HASH_KEY, whole).hex())
    lines.append("static const unsigned char kat_blob_tail[%d] = {" % len(tail))
    for i in range(0, len(tail), 16):
        lines.append("    " + " ".join("0x%02x," % b for b in tail[i:i + 16]))
    lines.append("};\n")
    lines.append("#endif")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache-vectors.h")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
