"""randint, permutation, choice: jax.random (jax 0.4.30, CPU) on raw uint32 keys. randint over
every integer width (8 and 16 bits take jax's byte views of the words; int32 over its whole range
wraps the span to 0); permutation of arange(n) over one, two rounds of sorting, and of an array
along an axis; choice with and without replacement, with and without p, of an int and of an
array. x64 where the case needs int64 (jax's int is then int64, which changes randint's width)."""
import importlib.util
import os

import numpy as np
import jax
import jax.numpy as jnp

_spec = importlib.util.spec_from_file_location(
    "_jaxenv", os.path.join(os.path.dirname(__file__), "_jaxenv.py"))
J = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(J)

PREFIX = "rint_"
NEEDS = ["jax"]


def case(name, op, dtype, inputs, out, opts, gen, part=False, files=()):
    opts = [(k, v) for k, v in opts] + ([("partitionable", "true")] if part else [])
    return dict(name=name, op=op, dtype=dtype, inputs=inputs, outputs=[("out.npy", out)],
                options=opts, needs=NEEDS, files=list(files),
                generator=gen + (" (jax_threefry_partitionable)" if part else ""))


def cases(rng):
    k = J.key(31)
    for lo, hi, dt, x64, n, part in ((0, 10, jnp.int32, False, 100, False),
                                     (-5, 1000003, jnp.int32, False, 64, False),
                                     (0, 10, jnp.int32, False, 100, True),
                                     (-2**31, 2**31, jnp.int32, True, 64, False),
                                     (0, 256, jnp.uint8, False, 33, False),
                                     (-128, 100, jnp.int8, False, 33, False),
                                     (-300, 300, jnp.int16, False, 21, False),
                                     (-10**12, 10**15, jnp.int64, True, 50, False),
                                     (-10**12, 10**15, jnp.int64, True, 50, True),
                                     (7, 2**32, jnp.uint32, True, 40, False),
                                     (0, 2**63 - 1, jnp.uint64, True, 20, False)):
        with J.mode(x64=x64, partitionable=part):
            out = np.asarray(jax.random.randint(k, (n,), lo, hi, dt))
        t = np.dtype(dt).name
        tag = f"{t}_{lo}_{hi}".replace("-", "m") + ("_part" if part else "")
        yield case(f"rint_randint_{tag}", "randint", dt, [("key.npy", k)], out,
                   [("shape", n), ("minval", lo), ("maxval", hi), ("dtype", t)],
                   f"jax.random.randint(key, ({n},), {lo}, {hi}, {t})", part)
    for n, x64, part in ((10, False, False), (2000, False, False), (10, True, False),
                         (50, False, True), (1, False, False)):
        with J.mode(x64=x64, partitionable=part):
            out = np.asarray(jax.random.permutation(k, n))
        t = out.dtype.name
        yield case(f"rint_permutation_n{n}_{t}" + ("_part" if part else ""), "permutation",
                   out.dtype, [("key.npy", k)], out, [("n", n), ("dtype", t)],
                   f"jax.random.permutation(key, {n})", part)
    x = rng.standard_normal(13).astype(np.float32)
    out = np.asarray(jax.random.permutation(k, x))
    yield case("rint_permutation_x1d", "permutation", np.float32, [("key.npy", k), ("x.npy", x)],
               out, [], "jax.random.permutation(key, x) of a 1-d x")
    x = rng.standard_normal((5, 4)).astype(np.float64)
    with J.mode(x64=True):
        out = np.asarray(jax.random.permutation(k, x, axis=1))
    yield case("rint_permutation_x2d_axis1", "permutation", np.float64,
               [("key.npy", k), ("x.npy", x)], out, [("axis", 1)],
               "jax.random.permutation(key, x, axis=1) of a [5, 4] x")
    # choice
    for n, shape, replace, x64 in ((10, (6,), True, False), (10, (3, 2), False, False),
                                   (100, (10,), True, True), (2000, (4,), False, False)):
        with J.mode(x64=x64):
            out = np.asarray(jax.random.choice(k, n, shape, replace))
        t = out.dtype.name
        st = "x".join(map(str, shape))
        yield case(f"rint_choice_n{n}_{st}_{'repl' if replace else 'norepl'}_{t}", "choice",
                   out.dtype, [("key.npy", k)], out,
                   [("n", n), ("shape", ",".join(map(str, shape))),
                    ("replace", str(replace).lower()), ("dtype", t)],
                   f"jax.random.choice(key, {n}, {shape}, replace={replace})")
    a = rng.standard_normal((8, 3)).astype(np.float32)
    out = np.asarray(jax.random.choice(k, a, (4,)))
    yield case("rint_choice_a2d_repl", "choice", np.float32, [("key.npy", k), ("a.npy", a)], out,
               [("shape", "4")], "jax.random.choice(key, a[8, 3], (4,))")
    out = np.asarray(jax.random.choice(k, a, (2,), replace=False, axis=1))
    yield case("rint_choice_a2d_axis1_norepl", "choice", np.float32,
               [("key.npy", k), ("a.npy", a)], out,
               [("shape", "2"), ("replace", "false"), ("axis", 1)],
               "jax.random.choice(key, a[8, 3], (2,), replace=False, axis=1)")
    p = rng.uniform(0.05, 1, 6).astype(np.float32)
    p /= p.sum()
    out = np.asarray(jax.random.choice(k, 6, (20,), True, p))
    yield case("rint_choice_p_repl", "choice", np.int32, [("key.npy", k)], out,
               [("n", 6), ("shape", "20"), ("p", "p.npy")], "jax.random.choice(key, 6, (20,), p=p)",
               files=[("p.npy", p)])
    p8 = rng.uniform(0.05, 1, 8).astype(np.float32)
    p8 /= p8.sum()
    out = np.asarray(jax.random.choice(k, 8, (5,), False, p8))
    yield case("rint_choice_p_norepl", "choice", np.int32, [("key.npy", k)], out,
               [("n", 8), ("shape", "5"), ("replace", "false"), ("p", "p.npy")],
               "jax.random.choice(key, 8, (5,), replace=False, p=p) (Gumbel top-k)",
               files=[("p.npy", p8)])
    av = rng.standard_normal(6)
    with J.mode(x64=True):
        out = np.asarray(jax.random.choice(k, av, (7,), True, p.astype(np.float64)))
    yield case("rint_choice_a_p64_repl", "choice", np.float64,
               [("key.npy", k), ("a.npy", av)], out,
               [("shape", "7"), ("dtype", "int64"), ("p", "p.npy")],
               "jax.random.choice(key, a[6], (7,), p=p) under x64",
               files=[("p.npy", p.astype(np.float64))])
