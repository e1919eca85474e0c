"""ssd: (moving - fixed)^2 in float64 NumPy, unreduced, summed and the mask-weighted mean
sum(w y) / sum(w) (an empty mask gives 0 by the op's rule)."""
import numpy as np

PREFIX = "ssd_"


def cases(rng):
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        a = rng.standard_normal((4, 5, 6)).astype(dt)
        b = rng.standard_normal((4, 5, 6)).astype(dt)
        y = (a.astype(np.float64) - b.astype(np.float64)) ** 2
        base = dict(op="ssd", dtype=dt, generator="numpy float64 (a - b)**2")
        yield dict(base, name=f"ssd_none_{t}", inputs=[("moving.npy", a), ("fixed.npy", b)],
                   outputs=[("out.npy", y.astype(dt))])
        yield dict(base, name=f"ssd_sum_{t}", inputs=[("moving.npy", a), ("fixed.npy", b)],
                   outputs=[("out.npy", np.array(y.sum(), dtype=dt))],
                   options=[("reduction", "sum")], generator="numpy float64 sum((a - b)**2)")
        m = rng.uniform(size=(4, 5, 6)) > 0.4
        yield dict(base, name=f"ssd_mean_boolmask_{t}",
                   inputs=[("moving.npy", a), ("fixed.npy", b), ("mask.npy", m)],
                   outputs=[("out.npy", np.array(y[m].mean(), dtype=dt))],
                   options=[("reduction", "mean")], generator="numpy float64 mean over the mask")
        w = rng.uniform(0.1, 1.0, size=(5, 6)).astype(dt)
        wb = np.broadcast_to(w.astype(np.float64), y.shape)
        yield dict(base, name=f"ssd_mask_weights_mean_{t}",
                   inputs=[("moving.npy", a), ("fixed.npy", b), ("mask.npy", w)],
                   outputs=[("out.npy", np.array((wb * y).sum() / wb.sum(), dtype=dt))],
                   options=[("reduction", "mean")],
                   generator="numpy float64 sum(w (a - b)**2) / sum(w), w broadcast")
        yield dict(base, name=f"ssd_none_weights_{t}",
                   inputs=[("moving.npy", a), ("fixed.npy", b), ("mask.npy", w)],
                   outputs=[("out.npy", (wb * y).astype(dt))],
                   generator="numpy float64 w (a - b)**2, w broadcast")
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((3, 4))
    yield dict(op="ssd", dtype=np.float64, name="ssd_mean_emptymask_float64",
               inputs=[("moving.npy", a), ("fixed.npy", b), ("mask.npy", np.zeros((3, 4), bool))],
               outputs=[("out.npy", np.array(0.0))], options=[("reduction", "mean")],
               generator="the op's documented rule: an empty mask's mean is 0")
