"""Compensated and pairwise sums (docs/numerics.md) against exact sums: math.fsum (the correctly
rounded sum of floats) and, for the dot product, fractions.Fraction (the exact sum of the exact
products), rounded once to the case's dtype. The ill-conditioned cases are checked here to be
discriminating: a plain left-to-right float64 sum of the same data misses the exact value by far
more than the op's tolerance, so an implementation whose compensation was optimised away fails."""
import math
from fractions import Fraction

import numpy as np

PREFIX = "prec_"


def plain(v):
    s = 0.0
    for t in v:
        s += float(t)
    return s


def rel(a, b):
    return abs(a - b) / abs(b)


def ill_sum(rng, n, cond_exp, d=1e-9):
    """n terms whose sum is small next to sum|x| (condition ~ 10^cond_exp): big terms of random
    exponents, their exact negatives shuffled in, and a few small terms."""
    k = n // 2 - 4
    big = rng.standard_normal(k) * 10.0 ** rng.uniform(0, cond_exp, size=k)
    small = rng.standard_normal(n - 2 * k)
    v = np.concatenate([big, -big * (1 + rng.uniform(-d, d, size=k)), small])
    rng.shuffle(v)
    return v


def pick(rng, n, cond_exp, lo_cond, hi_cond, need_plain):
    for _ in range(500):
        v = ill_sum(rng, n, cond_exp)
        ex = math.fsum(v)
        cond = np.abs(v).sum() / abs(ex)
        if lo_cond <= cond <= hi_cond and rel(plain(v), ex) > need_plain:
            return v, ex, cond
    raise SystemExit("precision.py: no discriminating data found")


def sums(rng):
    # gradient-test cases first (name order): moderate data
    for op in ("kahan_sum", "neumaier_sum"):
        x = rng.standard_normal((3, 40))
        yield dict(name=f"prec_{op}_a_axis_float64", op=op, dtype=np.float64,
                   inputs=[("x.npy", x)],
                   outputs=[("y.npy", np.array([math.fsum(r) for r in x]))],
                   options=[("axis", "-1")], generator="math.fsum of each row")
        x = rng.standard_normal((4, 6, 5))
        ex = np.array([[math.fsum(x[i, :, j]) for j in range(5)] for i in range(4)])
        yield dict(name=f"prec_{op}_b_axis1_float64", op=op, dtype=np.float64,
                   inputs=[("x.npy", x)], outputs=[("y.npy", ex)], options=[("axis", "1")],
                   generator="math.fsum along axis 1")
    # Kahan's error is ~2 eps sum|x|: a condition near 2e4 keeps it below 1e-11 relative. The
    # positive terms come first and their near-negatives after, so the plain sum's partial sums
    # are as large as sum|x| / 2 and its error lands far above 1e-11
    for _ in range(100):
        p = rng.uniform(1, 2, size=2000) * 1e4
        v = np.concatenate([p, -(p - rng.uniform(0, 2e-4, size=p.size) * p)])
        ex = math.fsum(v)
        cond = np.abs(v).sum() / abs(ex)
        if cond <= 2.5e4 and rel(plain(v), ex) > 2e-11:
            break
    else:
        raise SystemExit("precision.py: no discriminating data for kahan_sum")
    yield dict(name="prec_kahan_sum_c_illcond_float64", op="kahan_sum", dtype=np.float64,
               inputs=[("x.npy", v)], outputs=[("y.npy", np.array(ex))],
               generator=f"math.fsum (exact); condition {cond:.3g}; the plain float64 sum is off "
                         f"by {rel(plain(v), ex):.2g} relative")
    # Neumaier's: eps |s| + O(n^2 eps^2) sum|x|: conditions up to 1e12 stay below 1e-11
    v, ex, cond = pick(rng, 4000, 12.0, 1e9, 1e12, 1e-5)
    yield dict(name="prec_neumaier_sum_c_illcond_float64", op="neumaier_sum", dtype=np.float64,
               inputs=[("x.npy", v)], outputs=[("y.npy", np.array(ex))],
               generator=f"math.fsum (exact); condition {cond:.3g}; the plain float64 sum is off "
                         f"by {rel(plain(v), ex):.2g} relative")
    # the classic: 1 followed by terms below half an ulp of the running sum
    v = np.concatenate([[1.0], np.full(3000, 2.0 ** -54 * 1.5), [-1.0]])
    ex = math.fsum(v)
    assert plain(v) == 0.0
    for op in ("kahan_sum", "neumaier_sum"):
        yield dict(name=f"prec_{op}_d_lost_terms_float64", op=op, dtype=np.float64,
                   inputs=[("x.npy", v)], outputs=[("y.npy", np.array(ex))],
                   generator="math.fsum of [1, 3000 x 1.5 2^-54, -1]; the plain sum gives 0")
    # Neumaier, not Kahan: a term larger than the running sum
    v = np.array([1.0, 1e100, 1.0, -1e100])
    yield dict(name="prec_neumaier_sum_e_big_term_float64", op="neumaier_sum", dtype=np.float64,
               inputs=[("x.npy", v)], outputs=[("y.npy", np.array(math.fsum(v)))],
               generator="math.fsum of [1, 1e100, 1, -1e100] = 2 (Kahan's recurrence gives 0)")
    for op in ("kahan_sum", "neumaier_sum"):
        x = rng.uniform(0.5, 1.5, size=(5000,)).astype(np.float32)
        ex = math.fsum(float(t) for t in x)
        yield dict(name=f"prec_{op}_f_positive_float32", op=op, dtype=np.float32,
                   inputs=[("x.npy", x)], outputs=[("y.npy", np.array(ex, np.float32))],
                   generator="math.fsum of the float32 values, rounded to float32")


def dots(rng):
    def exact(a, b):
        return float(sum(Fraction(float(p)) * Fraction(float(q))
                         for p, q in zip(a.ravel(), b.ravel())))
    a = rng.standard_normal((3, 20))
    b = rng.standard_normal((3, 20))
    yield dict(name="prec_compensated_dot_a_axis_float64", op="compensated_dot",
               dtype=np.float64, inputs=[("a.npy", a), ("b.npy", b)],
               outputs=[("y.npy", np.array([exact(a[i], b[i]) for i in range(3)]))],
               options=[("axis", "-1")], generator="fractions: the exact dot of each row, rounded")
    a = rng.standard_normal((4, 5))
    b = rng.standard_normal((4, 5))
    yield dict(name="prec_compensated_dot_b_all_float64", op="compensated_dot",
               dtype=np.float64, inputs=[("a.npy", a), ("b.npy", b)],
               outputs=[("y.npy", np.array(exact(a, b)))],
               generator="fractions: the exact dot over every element, rounded")
    # ill-conditioned: b_i = s_i / a_i with s an ill-conditioned sum, so the products cancel
    for _ in range(500):
        s = ill_sum(rng, 2000, 12.0)
        a = rng.uniform(0.5, 2.0, size=s.size) * np.sign(rng.standard_normal(s.size))
        b = s / a
        ex = exact(a, b)
        cond = 2 * np.abs(a * b).sum() / abs(ex)
        naive = plain(a * b)
        if 1e8 <= cond <= 1e12 and rel(naive, ex) > 1e-6:
            break
    else:
        raise SystemExit("precision.py: no ill-conditioned dot found")
    yield dict(name="prec_compensated_dot_c_illcond_float64", op="compensated_dot",
               dtype=np.float64, inputs=[("a.npy", a), ("b.npy", b)],
               outputs=[("y.npy", np.array(ex))],
               generator=f"fractions: the exact dot, rounded; condition {cond:.3g}; the plain "
                         f"float64 dot is off by {rel(naive, ex):.2g} relative")
    a = rng.uniform(0.5, 1.5, size=(2, 3000)).astype(np.float32)
    b = rng.uniform(0.5, 1.5, size=(2, 3000)).astype(np.float32)
    yield dict(name="prec_compensated_dot_d_positive_float32", op="compensated_dot",
               dtype=np.float32, inputs=[("a.npy", a), ("b.npy", b)],
               outputs=[("y.npy", np.array([exact(a[i], b[i]) for i in range(2)], np.float32))],
               options=[("axis", "1")],
               generator="fractions: the exact dot of each float32 row, rounded to float32")


def pairwise(rng):
    x = rng.uniform(0.5, 1.5, size=(3, 1000))
    yield dict(name="prec_pairwise_sum_a_axis_float64", op="pairwise_sum", dtype=np.float64,
               inputs=[("x.npy", x)], outputs=[("y.npy", np.array([math.fsum(r) for r in x]))],
               options=[("axis", "-1")],
               generator="math.fsum of each row (positive terms: the cascade's bound applies)")
    x = rng.uniform(0.5, 1.5, size=(7, 9, 11))
    yield dict(name="prec_pairwise_sum_b_all_block16_float64", op="pairwise_sum",
               dtype=np.float64, inputs=[("x.npy", x)],
               outputs=[("y.npy", np.array(math.fsum(x.ravel())))],
               options=[("block_size", "16")], generator="math.fsum of every element")
    x = rng.uniform(0.5, 1.5, size=(20000,)).astype(np.float32)
    yield dict(name="prec_pairwise_sum_c_long_float32", op="pairwise_sum", dtype=np.float32,
               inputs=[("x.npy", x)],
               outputs=[("y.npy", np.array(math.fsum(float(t) for t in x), np.float32))],
               generator="math.fsum of the float32 values, rounded to float32")


def cases(rng):
    yield from sums(rng)
    yield from dots(rng)
    yield from pairwise(rng)
