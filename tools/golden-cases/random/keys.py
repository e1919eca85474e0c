"""key, split, fold_in: jax.random (jax 0.4.30, CPU) on raw uint32 keys. Seeds under x64 (a
64-bit seed, the rule nitrix follows); split with num a count or a shape, a batch of keys by
jax.vmap, and both layouts of jax_threefry_partitionable; fold_in with int32/int64/uint8 data,
negative data and broadcasting by jax.vmap."""
import importlib.util
import os

import numpy as np
import jax

_spec = importlib.util.spec_from_file_location(
    "_jaxenv", os.path.join(os.path.dirname(__file__), "_jaxenv.py"))
J = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(J)

PREFIX = "rkey_"
NEEDS = ["jax"]


def cases(rng):
    for seed in (0, 42, 2**31 - 1, 2**32 + 5, -1, -(2**63), 2**63 - 1):
        with J.mode(x64=True):
            k = np.asarray(jax.random.PRNGKey(seed), np.uint32)
        tag = str(seed).replace("-", "m")
        yield dict(name=f"rkey_key_{tag}", op="key", dtype=np.uint32, inputs=[],
                   outputs=[("out.npy", k)], options=[("seed", seed)], needs=NEEDS,
                   generator="jax.random.PRNGKey(seed) under jax_enable_x64")
    k7 = J.key(7)
    for part in (False, True):
        p = "_part" if part else ""
        popt = [("partitionable", "true")] if part else []
        gen = "jax.random.split" + (" (jax_threefry_partitionable)" if part else "")
        for num in (2, 5, (3, 4)):
            with J.mode(partitionable=part):
                out = np.asarray(jax.random.split(k7, num), np.uint32)
            nt = "x".join(map(str, num)) if isinstance(num, tuple) else str(num)
            ntext = ",".join(map(str, num)) if isinstance(num, tuple) else str(num)
            yield dict(name=f"rkey_split_{nt}{p}", op="split", dtype=np.uint32,
                       inputs=[("key.npy", k7)], outputs=[("out.npy", out)],
                       options=[("num", ntext)] + popt, needs=NEEDS, generator=gen)
        keys = np.stack([J.key(s) for s in range(6)]).reshape(3, 2, 2)
        with J.mode(partitionable=part):
            out = np.asarray(jax.vmap(jax.vmap(lambda k: jax.random.split(k, 3)))(keys),
                             np.uint32)
        yield dict(name=f"rkey_split_batch{p}", op="split", dtype=np.uint32,
                   inputs=[("key.npy", keys)], outputs=[("out.npy", out)],
                   options=[("num", "3")] + popt, needs=NEEDS,
                   generator=gen + " under jax.vmap over a [3, 2] batch of keys")
    k3 = J.key(3)
    for tag, data, x64 in (("int32", np.int32(5), False), ("neg", np.int32(-7), False),
                           ("int64", np.int64(2**40 + 9), True), ("uint8", np.uint8(200), False)):
        with J.mode(x64=x64):
            out = np.asarray(jax.random.fold_in(k3, data), np.uint32)
        yield dict(name=f"rkey_fold_in_{tag}", op="fold_in", dtype=np.uint32,
                   inputs=[("key.npy", k3), ("data.npy", np.array(data))],
                   outputs=[("out.npy", out)], needs=NEEDS,
                   generator="jax.random.fold_in(key, data)" + (" under x64" if x64 else ""))
    data = np.array([0, 1, 2**31, 12345], np.uint32).astype(np.int64)
    with J.mode(x64=True):
        out = np.asarray(jax.vmap(lambda d: jax.random.fold_in(k3, d))(data), np.uint32)
    yield dict(name="rkey_fold_in_vector", op="fold_in", dtype=np.uint32,
               inputs=[("key.npy", k3), ("data.npy", data)], outputs=[("out.npy", out)],
               needs=NEEDS, generator="jax.vmap(jax.random.fold_in) over data, one key, x64")
    keys = np.stack([J.key(s) for s in (11, 12, 13)])
    data = np.array([4, 5, 6], np.int32)
    out = np.asarray(jax.vmap(jax.random.fold_in)(keys, data), np.uint32)
    yield dict(name="rkey_fold_in_pairs", op="fold_in", dtype=np.uint32,
               inputs=[("key.npy", keys), ("data.npy", data)], outputs=[("out.npy", out)],
               needs=NEEDS, generator="jax.vmap(jax.random.fold_in) over keys and data")
