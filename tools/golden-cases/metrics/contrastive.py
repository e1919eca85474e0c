"""Contrastive kernels: info_nce, dino_cross_entropy, ibot_cross_entropy, koleo.

Oracles in float64 NumPy/SciPy written here, never with nitrix:
  - info_nce: the JAX reference's definition (rows normalised as x / max(||x||, 1e-12), L = za zb^T
    / temperature, the mean of the row-wise and column-wise cross-entropies against the diagonal)
    with scipy.special.logsumexp;
  - dino_cross_entropy, ibot_cross_entropy, koleo: DINOv2's formulas (dinov2/loss/
    dino_clstoken_loss.py, ibot_patch_loss.py, koleo_loss.py) transcribed to NumPy: softmax of the
    centred teacher over temperature, sum(t * log_softmax(s / student_temp)); iBOT's
    sum(loss * mask) / clamp(sum(mask), 1) per sample; KoLeo's F.normalize(eps), the neighbour by
    the largest inner product with the diagonal filled with -1, torch's pairwise distance
    ||a - b + 1e-8|| and -log(d + eps).
Inputs are drawn in float64 and rounded to the case's dtype first; the oracle reads the rounded
values."""
import numpy as np
from scipy.special import logsumexp, softmax

PREFIX = "contrastive_"


def normalize(x, eps):
    """torch.nn.functional.normalize(x, p=2, dim=-1, eps)."""
    n = np.sqrt((x * x).sum(-1, keepdims=True))
    return x / np.maximum(n, eps)


def info_nce(za, zb, temperature):
    a = normalize(za.astype(np.float64), 1e-12)
    b = normalize(zb.astype(np.float64), 1e-12)
    lg = a @ b.T / temperature
    idx = np.arange(lg.shape[0])
    log_ab = lg - logsumexp(lg, axis=1, keepdims=True)
    log_ba = lg.T - logsumexp(lg.T, axis=1, keepdims=True)
    return -0.5 * (log_ab[idx, idx] + log_ba[idx, idx])


def dino_terms(student, teacher, center, student_temp, teacher_temp):
    """DINOv2: sum(t * log_softmax(s / student_temp), -1), t = softmax((teacher - center) / tt)."""
    s, te, c = (v.astype(np.float64) for v in (student, teacher, center))
    t = softmax((te - c) / teacher_temp, axis=-1)
    s = s / student_temp
    lsm = s - logsumexp(s, axis=-1, keepdims=True)
    return np.sum(t * lsm, axis=-1)


def ibot(student, teacher, center, mask, student_temp, teacher_temp):
    """DINOv2 iBOTPatchLoss.forward, per sample (before the batch mean), with the sign of -loss."""
    loss = dino_terms(student, teacher, center, student_temp, teacher_temp)
    m = mask.astype(np.float64)
    return -np.sum(loss * m, axis=-1) / np.maximum(m.sum(-1), 1.0)


def koleo(z, eps):
    """DINOv2 KoLeoLoss.forward per point (before the mean)."""
    x = normalize(z.astype(np.float64), eps)
    dots = x @ x.T
    n = x.shape[0]
    dots.reshape(-1)[:: n + 1] = -1.0
    nbr = np.argmax(dots, axis=1)
    d = np.sqrt(((x - x[nbr] + 1e-8) ** 2).sum(-1))  # nn.PairwiseDistance(2, eps=1e-8)
    return -np.log(d + eps)


def reduce(y, reduction):
    return y if reduction == "none" else np.array(y.sum() if reduction == "sum" else y.mean())


def cases(rng):
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        # info_nce: positives correlated with their anchors, the rest independent
        za = rng.standard_normal((6, 5))
        zb = (0.8 * za + 0.6 * rng.standard_normal((6, 5)))
        za, zb = za.astype(dt), zb.astype(dt)
        yield dict(name=f"contrastive_infonce_none_{t}", op="info_nce", dtype=dt,
                   inputs=[("za.npy", za), ("zb.npy", zb)],
                   outputs=[("out.npy", info_nce(za, zb, 0.5).astype(dt))],
                   generator="numpy/scipy float64 symmetric InfoNCE on L2-normalised rows, "
                             "temperature 0.5")
        yield dict(name=f"contrastive_infonce_cold_mean_{t}", op="info_nce", dtype=dt,
                   inputs=[("za.npy", za), ("zb.npy", zb)],
                   outputs=[("out.npy", reduce(info_nce(za, zb, 0.02), "mean").astype(dt))],
                   options=[("temperature", "0.02"), ("reduction", "mean")],
                   generator="numpy/scipy float64 symmetric InfoNCE, temperature 0.02 (logits "
                             "up to 50), mean")
        za = rng.standard_normal((4, 3)) * np.array([[1e-3], [1.0], [50.0], [1.0]])
        zb = rng.standard_normal((4, 3))
        za, zb = za.astype(dt), zb.astype(dt)
        yield dict(name=f"contrastive_infonce_scales_sum_{t}", op="info_nce", dtype=dt,
                   inputs=[("za.npy", za), ("zb.npy", zb)],
                   outputs=[("out.npy", reduce(info_nce(za, zb, 0.1), "sum").astype(dt))],
                   options=[("temperature", "0.1"), ("reduction", "sum")],
                   generator="numpy/scipy float64 symmetric InfoNCE (rows of norms 1e-3..50: "
                             "normalised inside), temperature 0.1, sum")

        # dino_cross_entropy: (batch, crops, k) with a (k,) centre, DINO's default temperatures
        # head outputs of DINO's scale: (teacher - center) / 0.04 spreads over a few units, so
        # neither softmax saturates and every input's gradient is well above FD's resolution
        s = (rng.standard_normal((3, 2, 8)) * 0.3).astype(dt)
        te = (rng.standard_normal((3, 2, 8)) * 0.1).astype(dt)
        c = (rng.standard_normal(8) * 0.05).astype(dt)
        yield dict(name=f"contrastive_dino_none_{t}", op="dino_cross_entropy", dtype=dt,
                   inputs=[("student.npy", s), ("teacher.npy", te), ("center.npy", c)],
                   outputs=[("out.npy", (-dino_terms(s, te, c, 0.1, 0.04)).astype(dt))],
                   generator="numpy/scipy float64 DINOv2 DINOLoss terms, student_temp 0.1, "
                             "teacher_temp 0.04")
        s = (rng.standard_normal((5, 6)) * 3.0).astype(dt)  # a saturated student
        te = (rng.standard_normal((5, 6)) * 0.2).astype(dt)
        c = (rng.standard_normal((1, 6)) * 0.1).astype(dt)
        yield dict(name=f"contrastive_dino_center2d_mean_{t}", op="dino_cross_entropy", dtype=dt,
                   inputs=[("student.npy", s), ("teacher.npy", te), ("center.npy", c)],
                   outputs=[("out.npy", np.array(-dino_terms(s, te, c, 0.2, 0.07).mean())
                             .astype(dt))],
                   options=[("student_temp", "0.2"), ("teacher_temp", "0.07"),
                            ("reduction", "mean")],
                   generator="numpy/scipy float64 DINOv2 DINOLoss (center (1, k)): "
                             "-mean(sum(t * log_softmax(s / 0.2)))")

        # ibot_cross_entropy: (batch, tokens, k); sample 1 has no masked token
        s = (rng.standard_normal((3, 5, 6)) * 0.3).astype(dt)
        te = (rng.standard_normal((3, 5, 6)) * 0.1).astype(dt)
        c = (rng.standard_normal(6) * 0.05).astype(dt)
        m = rng.uniform(size=(3, 5)) > 0.4
        m[0, 0], m[1, :], m[2, 1] = True, False, True
        yield dict(name=f"contrastive_ibot_none_{t}", op="ibot_cross_entropy", dtype=dt,
                   inputs=[("student.npy", s), ("teacher.npy", te), ("center.npy", c),
                           ("mask.npy", m)],
                   outputs=[("out.npy", ibot(s, te, c, m, 0.1, 0.04).astype(dt))],
                   generator="numpy/scipy float64 DINOv2 iBOTPatchLoss.forward per sample "
                             "(sum(loss mask) / clamp(sum(mask), 1)); an all-unmasked sample")
        mi = (rng.uniform(size=(3, 5)) > 0.5).astype(np.int32) * 3  # nonzero counts as masked
        mi[:, 0] = 1
        yield dict(name=f"contrastive_ibot_intmask_mean_{t}", op="ibot_cross_entropy", dtype=dt,
                   inputs=[("student.npy", s), ("teacher.npy", te), ("center.npy", c),
                           ("mask.npy", mi)],
                   outputs=[("out.npy", reduce(ibot(s, te, c, mi != 0, 0.15, 0.05), "mean")
                             .astype(dt))],
                   options=[("student_temp", "0.15"), ("teacher_temp", "0.05"),
                            ("reduction", "mean")],
                   generator="numpy/scipy float64 DINOv2 iBOTPatchLoss.forward, -loss.mean() "
                             "(an int32 mask, nonzero = masked)")

        # koleo: well-separated nearest neighbours (no near ties between candidates)
        z = rng.standard_normal((8, 5)).astype(dt)
        yield dict(name=f"contrastive_koleo_none_{t}", op="koleo", dtype=dt,
                   inputs=[("z.npy", z)], outputs=[("out.npy", koleo(z, 1e-8).astype(dt))],
                   generator="numpy float64 DINOv2 KoLeoLoss per point, eps 1e-8")
        z = (rng.standard_normal((6, 3)) * np.array([[1e-2], [1], [10], [1], [100], [1]]))
        z = z.astype(dt)
        yield dict(name=f"contrastive_koleo_eps_sum_{t}", op="koleo", dtype=dt,
                   inputs=[("z.npy", z)],
                   outputs=[("out.npy", reduce(koleo(z, 1e-3), "sum").astype(dt))],
                   options=[("eps", "1e-3"), ("reduction", "sum")],
                   generator="numpy float64 DINOv2 KoLeoLoss (forward eps 1e-3), sum")
    z = rng.standard_normal((5, 4))
    z[3] = z[1]  # an exact duplicate: distance ||1e-8 * 1|| = 2e-8
    yield dict(name="contrastive_koleo_zdup_mean_float64", op="koleo", dtype=np.float64,
               inputs=[("z.npy", z)], outputs=[("out.npy", reduce(koleo(z, 1e-8), "mean"))],
               options=[("reduction", "mean")],
               fd="exact duplicate points: their distance is 2e-8, below any difference step",
               generator="numpy float64 DINOv2 KoLeoLoss mean, with duplicate points")
