"""random_bits, uniform, normal, bernoulli, truncated_normal: jax.random (jax 0.4.30, CPU) on raw
uint32 keys; odd and even sizes (jax pads an odd count of words), 8/32/64 bits, float32 and (under
x64) float64, a batch of keys by jax.vmap, both layouts of jax_threefry_partitionable. The first
normal case is large (2^15 draws) for the ulp measure of tests/random."""
import importlib.util
import os

import numpy as np
import jax
import jax.numpy as jnp

_spec = importlib.util.spec_from_file_location(
    "_jaxenv", os.path.join(os.path.dirname(__file__), "_jaxenv.py"))
J = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(J)

PREFIX = "rdraw_"
NEEDS = ["jax"]


def shape_text(shape):
    return ",".join(map(str, shape))


def case(name, op, dtype, key, out, opts, gen, part=False):
    opts = [(k, v) for k, v in opts] + ([("partitionable", "true")] if part else [])
    return dict(name=name, op=op, dtype=dtype, inputs=[("key.npy", key)],
                outputs=[("out.npy", out)], options=opts, needs=NEEDS,
                generator=gen + (" (jax_threefry_partitionable)" if part else ""))


def cases(rng):
    k = J.key(20)
    batch = np.stack([J.key(s) for s in (1, 2)])
    for part in (False, True):
        p = "_part" if part else ""
        for shape, bits, dt, x64 in (((7,), 32, jnp.uint32, False), ((4, 6), 32, jnp.uint32, False),
                                     ((5,), 64, jnp.uint64, True), ((11,), 8, jnp.uint8, False)):
            with J.mode(x64=x64, partitionable=part):
                out = np.asarray(jax.random.bits(k, shape, dt))
            yield case(f"rdraw_bits{bits}_{shape_text(shape).replace(',', 'x')}{p}", "random_bits",
                       out.dtype, k, out, [("shape", shape_text(shape)), ("bit_width", bits)],
                       f"jax.random.bits(key, {shape}, {np.dtype(dt).name})", part)
        with J.mode(partitionable=part):
            out = np.asarray(jax.vmap(lambda kk: jax.random.bits(kk, (3,)))(batch))
        yield case(f"rdraw_bits32_batch{p}", "random_bits", np.uint32, batch, out,
                   [("shape", "3")], "jax.vmap(jax.random.bits) over 2 keys", part)
        # normal: the large f32 case first (the ulp measure reads it)
        with J.mode(partitionable=part):
            out = np.asarray(jax.random.normal(k, (2**15 if not part else 1001,), jnp.float32))
        yield case(f"rdraw_normal_f32_{out.size}{p}", "normal", np.float32, k, out,
                   [("shape", out.size)], "jax.random.normal(key, shape, float32)", part)
        with J.mode(x64=True, partitionable=part):
            out = np.asarray(jax.random.normal(k, (4097,), jnp.float64))
        yield case(f"rdraw_normal_f64_4097{p}", "normal", np.float64, k, out,
                   [("shape", 4097), ("dtype", "float64")],
                   "jax.random.normal(key, shape, float64) under x64", part)
        with J.mode(partitionable=part):
            out = np.asarray(jax.vmap(lambda kk: jax.random.normal(kk, (2, 3)))(batch))
        yield case(f"rdraw_normal_batch{p}", "normal", np.float32, batch, out,
                   [("shape", "2,3")], "jax.vmap(jax.random.normal) over 2 keys", part)
        for dt, x64, lo, hi, n in ((jnp.float32, False, 0.0, 1.0, 1001),
                                   (jnp.float32, False, -2.5, 3.75, 64),
                                   (jnp.float64, True, 0.0, 1.0, 999),
                                   (jnp.float64, True, -1e3, 1e-3, 64)):
            with J.mode(x64=x64, partitionable=part):
                out = np.asarray(jax.random.uniform(k, (n,), dt, lo, hi))
            t = np.dtype(dt).name
            yield case(f"rdraw_uniform_{t}_{n}{p}", "uniform", dt, k, out,
                       [("shape", n), ("dtype", t), ("minval", repr(lo)), ("maxval", repr(hi))],
                       f"jax.random.uniform(key, ({n},), {t}, {lo}, {hi})", part)
    with J.mode():
        out = np.asarray(jax.vmap(lambda kk: jax.random.uniform(kk, (3, 2)))(batch))
    yield case("rdraw_uniform_batch", "uniform", np.float32, batch, out, [("shape", "3,2")],
               "jax.vmap(jax.random.uniform) over 2 keys")
    for p, dt, x64, n in ((0.3, jnp.float32, False, 500), (0.7, jnp.float64, True, 300),
                          (0.0, jnp.float32, False, 10), (1.0, jnp.float32, False, 10)):
        with J.mode(x64=x64):
            out = np.asarray(jax.random.bernoulli(k, jnp.asarray(p, dt), (n,)))
        t = np.dtype(dt).name
        yield case(f"rdraw_bernoulli_{t}_{p}", "bernoulli", dt, k, out,
                   [("p", repr(p)), ("shape", n), ("dtype", t)],
                   f"jax.random.bernoulli(key, {t}({p}), ({n},))")
    for lo, hi, dt, x64, n in ((-1.5, 2.0, jnp.float32, False, 1000),
                               (-np.inf, 0.5, jnp.float32, False, 200),
                               (0.25, np.inf, jnp.float32, False, 200),
                               (-1.5, 2.0, jnp.float64, True, 1000)):
        with J.mode(x64=x64):
            out = np.asarray(jax.random.truncated_normal(k, lo, hi, (n,), dt))
        t = np.dtype(dt).name
        tag = f"{lo}_{hi}".replace("-", "m").replace("inf", "inf")
        yield case(f"rdraw_truncated_normal_{t}_{tag}", "truncated_normal", dt, k, out,
                   [("lower", repr(float(lo))), ("upper", repr(float(hi))), ("shape", n),
                    ("dtype", t)], f"jax.random.truncated_normal(key, {lo}, {hi}, ({n},), {t})")
