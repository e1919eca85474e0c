"""Classification from logits: bce_with_logits, cross_entropy_with_logits, focal_loss.

Oracles in float64 from the stable closed forms, written here and never with nitrix:
  - bce:  -(t log_expit(x) + (1 - t) log_expit(-x)), with pos_weight p: the positive term times p
    (torch.nn.BCEWithLogitsLoss's definition), scipy.special.log_expit (stable at any |x|);
  - cross entropy: scipy.special.logsumexp over the class axis of the logits minus the target's
    logit (np.take_along_axis);
  - focal (torchvision.ops.sigmoid_focal_loss's definition): alpha_t (1 - p_t)^gamma bce, with
    1 - p_t = t expit(-x) + (1 - t) expit(x) (the same number as 1 - (p t + (1 - p)(1 - t)), kept
    exact where p_t is near 1).
Inputs include logits of +-100 and +-1000, where the naive sigmoid / log / exp forms overflow or
give log(0). Inputs are drawn in float64 and rounded to the case's dtype first; the oracle reads
the rounded values, so the expected output is exact for the case's inputs."""
import numpy as np
from scipy.special import expit, log_expit, logsumexp

PREFIX = "logits_"
EXTREME = np.array([100.0, -100.0, 1000.0, -1000.0, 0.0, 30.0, -30.0, 1e-3])


def logits(rng, shape, dt):
    """Moderate logits with the extreme values written over the first elements."""
    x = rng.standard_normal(shape) * 3.0
    flat = x.reshape(-1)
    k = min(flat.size, EXTREME.size)
    flat[:k] = EXTREME[:k]
    return x.astype(dt)


def targets(rng, shape, dt):
    """Hard 0/1 targets on even elements, soft ones in (0, 1) on odd."""
    t = (rng.uniform(size=shape) > 0.5).astype(np.float64)
    flat = t.reshape(-1)
    flat[1::2] = rng.uniform(0.05, 0.95, size=flat[1::2].shape)
    return t.astype(dt)


def bce(x, t, pw=None):
    x, t = x.astype(np.float64), t.astype(np.float64)
    pos = t * log_expit(x) if pw is None else pw.astype(np.float64) * t * log_expit(x)
    return -(pos + (1.0 - t) * log_expit(-x))


def focal(x, t, gamma, alpha):
    x, t = x.astype(np.float64), t.astype(np.float64)
    q = t * expit(-x) + (1.0 - t) * expit(x)
    y = bce(x, t) * q ** gamma
    if alpha >= 0:
        y = (alpha * t + (1.0 - alpha) * (1.0 - t)) * y
    return y


def ce(x, target, axis):
    """-log softmax(x)[target] = log sum_c exp(x_c - x_target): the logits are shifted by the
    target's (exactly, for f32 inputs) before scipy's logsumexp, so a small loss next to logits of
    1000 is not rounded at 1000's ulp as logsumexp(x) - x_target would be."""
    x = x.astype(np.float64)
    pick = np.take_along_axis(x, np.expand_dims(target.astype(np.int64), axis), axis)
    return logsumexp(x - pick, axis=axis)


def reduce(y, reduction, w=None):
    w = np.ones_like(y) if w is None else np.broadcast_to(w.astype(np.float64), y.shape)
    if reduction == "none":
        return w * y
    if reduction == "sum":
        return np.array((w * y).sum())
    return np.array((w * y).sum() / w.sum() if w.sum() != 0 else 0.0)


def cases(rng):
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        # bce_with_logits
        x, tg = logits(rng, (4, 6), dt), targets(rng, (4, 6), dt)
        yield dict(name=f"logits_bce_extreme_{t}", op="bce_with_logits", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg)],
                   outputs=[("out.npy", bce(x, tg).astype(dt))],
                   generator="scipy log_expit float64: -(t log_expit(x) + (1-t) log_expit(-x))")
        x, tg = logits(rng, (3, 4, 5), dt), targets(rng, (3, 4, 5), dt)
        w = rng.uniform(0.2, 1.0, size=(4, 5)).astype(dt)
        pw = rng.uniform(0.5, 3.0, size=(5,)).astype(dt)
        yield dict(name=f"logits_bce_posweight_{t}", op="bce_with_logits", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg), ("mask.npy", w),
                           ("pos_weight.npy", pw)],
                   outputs=[("out.npy", reduce(bce(x, tg, pw), "none", w).astype(dt))],
                   generator="scipy log_expit float64: -(p t log_expit(x) + (1-t) "
                             "log_expit(-x)), times the mask weights")
        m = rng.uniform(size=(3, 4, 5)) > 0.3
        yield dict(name=f"logits_bce_sum_mean_mask_{t}", op="bce_with_logits", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg), ("mask.npy", m)],
                   outputs=[("out.npy", reduce(bce(x, tg), "mean", m).astype(dt))],
                   options=[("reduction", "mean")],
                   generator="scipy log_expit float64 bce, mean over the bool mask")
        yield dict(name=f"logits_bce_sum_{t}", op="bce_with_logits", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg)],
                   outputs=[("out.npy", reduce(bce(x, tg), "sum").astype(dt))],
                   options=[("reduction", "sum")], generator="scipy log_expit float64 bce, sum")

        # cross_entropy_with_logits: class axis 1 of (batch, class, spatial), i64 targets
        x = logits(rng, (3, 5, 4), dt)
        x[1, :, 0] = [1000.0, -1000.0, 999.0, 0.0, -5.0]  # target logit at the top
        x[2, :, 3] = [-1000.0, 1000.0, 0.0, 100.0, -100.0]  # target logit far below the max
        target = rng.randint(0, 5, size=(3, 4)).astype(np.int64)
        target[1, 0], target[2, 3] = 0, 0
        yield dict(name=f"logits_ce_extreme_{t}", op="cross_entropy_with_logits", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", target)],
                   outputs=[("out.npy", ce(x, target, 1).astype(dt))],
                   generator="scipy logsumexp float64 of x - x_target (take_along_axis)")
        # class axis last, i32 targets, bool mask broadcast over the batch, mean
        x = logits(rng, (2, 3, 7), dt)
        target = rng.randint(0, 7, size=(2, 3)).astype(np.int32)
        m = np.array([True, False, True])
        yield dict(name=f"logits_ce_axis_last_mask_mean_{t}", op="cross_entropy_with_logits",
                   dtype=dt, inputs=[("logits.npy", x), ("target.npy", target), ("mask.npy", m)],
                   outputs=[("out.npy", reduce(ce(x, target, 2), "mean", m).astype(dt))],
                   options=[("axis", "-1"), ("reduction", "mean")],
                   generator="scipy logsumexp float64 of x - x_target over the last axis, "
                             "mean over the mask (broadcast)")
        x = logits(rng, (6, 4), dt)
        target = rng.randint(0, 4, size=(6,)).astype(np.int64)
        yield dict(name=f"logits_ce_sum_{t}", op="cross_entropy_with_logits", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", target)],
                   outputs=[("out.npy", reduce(ce(x, target, 1), "sum").astype(dt))],
                   options=[("reduction", "sum")],
                   generator="scipy logsumexp float64 of x - x_target, sum")

        # focal_loss
        x, tg = logits(rng, (4, 6), dt), targets(rng, (4, 6), dt)
        yield dict(name=f"logits_focal_extreme_{t}", op="focal_loss", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg)],
                   outputs=[("out.npy", focal(x, tg, 2.0, 0.25).astype(dt))],
                   generator="numpy/scipy float64 torchvision sigmoid_focal_loss definition, "
                             "gamma 2, alpha 0.25, log_expit bce")
        # gamma < 1 at hard targets of confident logits: 1 - p_t is sigmoid(-|x|) there (4e-44 at
        # |x| = 100), and (1 - p_t)^gamma changes in t on that scale, far below a difference step;
        # so the FD-checked case has soft targets and a second one hard ones
        x = logits(rng, (3, 5), dt)
        tg = rng.uniform(0.05, 0.95, size=(3, 5)).astype(dt)
        yield dict(name=f"logits_focal_gamma_half_noalpha_{t}", op="focal_loss", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg)],
                   outputs=[("out.npy", focal(x, tg, 0.5, -1.0).astype(dt))],
                   options=[("gamma", "0.5"), ("alpha", "-1")],
                   generator="numpy/scipy float64 focal loss, gamma 0.5, no alpha weighting, "
                             "soft targets")
        th = (rng.uniform(size=(3, 5)) > 0.5).astype(dt)
        yield dict(name=f"logits_focal_hard_gamma_half_{t}", op="focal_loss", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", th)],
                   outputs=[("out.npy", focal(x, th, 0.5, 0.4).astype(dt))],
                   options=[("gamma", "0.5"), ("alpha", "0.4")],
                   fd="hard targets with gamma < 1: (1 - p_t)^gamma changes in t on the "
                      "scale of sigmoid(-|x|), far below a difference step",
                   generator="numpy/scipy float64 focal loss, gamma 0.5, alpha 0.4, hard "
                             "targets")
        w = rng.uniform(0.0, 1.0, size=(3, 5)).astype(dt)
        yield dict(name=f"logits_focal_mean_weights_{t}", op="focal_loss", dtype=dt,
                   inputs=[("logits.npy", x), ("target.npy", tg), ("mask.npy", w)],
                   outputs=[("out.npy", reduce(focal(x, tg, 0.0, 0.75), "mean", w).astype(dt))],
                   options=[("gamma", "0"), ("alpha", "0.75"), ("reduction", "mean")],
                   generator="numpy/scipy float64 focal loss, gamma 0 (alpha-weighted bce), "
                             "weighted mean")
