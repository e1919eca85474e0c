"""Kernels: sklearn.metrics.pairwise (linear, rbf, polynomial, sigmoid, cosine_similarity,
euclidean_distances squared) for theta absent; with a vector or matrix theta, the closed forms
x^T theta y in float64 NumPy (sklearn has no metric argument)."""
import numpy as np
from sklearn.metrics import pairwise as pw

PREFIX = "lak_"


def cases(rng):
    f64 = np.float64
    for dt in (f64, np.float32):
        t = np.dtype(dt).name
        x0 = rng.standard_normal((5, 3)).astype(dt)
        x1 = rng.standard_normal((4, 3)).astype(dt)
        a, b = x0.astype(f64), x1.astype(f64)
        sk = dict(needs=["sklearn"])
        yield dict(op="linear_kernel", dtype=dt, name=f"lak_linear_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("K.npy", pw.linear_kernel(a, b).astype(dt))],
                   generator="sklearn.metrics.pairwise.linear_kernel", **sk)
        yield dict(op="linear_distance", dtype=dt, name=f"lak_distance_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("D.npy", pw.euclidean_distances(a, b, squared=True).astype(dt))],
                   generator="sklearn euclidean_distances(squared=True)", **sk)
        yield dict(op="rbf_kernel", dtype=dt, name=f"lak_rbf_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("K.npy", pw.rbf_kernel(a, b, gamma=0.7).astype(dt))],
                   options=[("gamma", "0.7")], generator="sklearn rbf_kernel(gamma=0.7)", **sk)
        yield dict(op="rbf_kernel", dtype=dt, name=f"lak_rbf_self_default_{t}",
                   inputs=[("X0.npy", x0)], outputs=[("K.npy", pw.rbf_kernel(a).astype(dt))],
                   generator="sklearn rbf_kernel(X) (gamma = 1 / d)", **sk)
        yield dict(op="gaussian_kernel", dtype=dt, name=f"lak_gaussian_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("K.npy", pw.rbf_kernel(a, b, gamma=1 / (2 * 1.3 ** 2)).astype(dt))],
                   options=[("sigma", "1.3")], generator="sklearn rbf_kernel(gamma=1/(2 1.3^2))",
                   **sk)
        yield dict(op="polynomial_kernel", dtype=dt, name=f"lak_poly_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("K.npy", pw.polynomial_kernel(a, b, degree=3, gamma=0.5,
                                                           coef0=1.2).astype(dt))],
                   options=[("gamma", "0.5"), ("order", "3"), ("r", "1.2")],
                   generator="sklearn polynomial_kernel(degree=3, gamma=0.5, coef0=1.2)", **sk)
        yield dict(op="sigmoid_kernel", dtype=dt, name=f"lak_sigmoid_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("K.npy", pw.sigmoid_kernel(a, b, gamma=0.3, coef0=0.2).astype(dt))],
                   options=[("gamma", "0.3"), ("r", "0.2")],
                   generator="sklearn sigmoid_kernel(gamma=0.3, coef0=0.2)", **sk)
        yield dict(op="cosine_kernel", dtype=dt, name=f"lak_cosine_{t}",
                   inputs=[("X0.npy", x0), ("X1.npy", x1)],
                   outputs=[("K.npy", pw.cosine_similarity(a, b).astype(dt))],
                   generator="sklearn cosine_similarity (no eps; 1e-16 relative apart)", **sk)
        # metrics: a vector and a matrix theta, batched inputs
        xb0 = rng.standard_normal((2, 5, 3)).astype(dt)
        xb1 = rng.standard_normal((2, 4, 3)).astype(dt)
        tv = rng.uniform(0.5, 2.0, 3).astype(dt)
        m = rng.standard_normal((3, 3))
        tm = (m @ m.T / 3 + np.eye(3)).astype(dt)
        A, B = xb0.astype(f64), xb1.astype(f64)
        for nm, th in (("vec", tv), ("mat", tm)):
            T = np.diag(th.astype(f64)) if th.ndim == 1 else th.astype(f64)
            K = A @ T @ np.swapaxes(B, -1, -2)
            qa = np.einsum("...id,de,...ie->...i", A, T, A)[..., :, None]
            qb = np.einsum("...id,de,...ie->...i", B, T, B)[..., None, :]
            D = qa + qb - 2 * K
            yield dict(op="linear_kernel", dtype=dt, name=f"lak_linear_theta_{nm}_{t}",
                       inputs=[("X0.npy", xb0), ("X1.npy", xb1), ("theta.npy", th)],
                       outputs=[("K.npy", K.astype(dt))], generator="numpy X0 theta X1^T")
            yield dict(op="linear_distance", dtype=dt, name=f"lak_distance_theta_{nm}_{t}",
                       inputs=[("X0.npy", xb0), ("X1.npy", xb1), ("theta.npy", th)],
                       outputs=[("D.npy", D.astype(dt))],
                       generator="numpy (x - y)^T theta (x - y) via the expansion")
            yield dict(op="rbf_kernel", dtype=dt, name=f"lak_rbf_theta_{nm}_{t}",
                       inputs=[("X0.npy", xb0), ("X1.npy", xb1), ("theta.npy", th)],
                       outputs=[("K.npy", np.exp(-0.4 * D).astype(dt))],
                       options=[("gamma", "0.4")], generator="numpy exp(-0.4 (x-y)^T theta (x-y))")
            eps = np.finfo(dt).eps
            na = A / (np.sqrt(qa) + eps)
            yield dict(op="parameterised_norm", dtype=dt, name=f"lak_norm_theta_{nm}_{t}",
                       inputs=[("X.npy", xb0), ("theta.npy", th)],
                       outputs=[("Y.npy", na.astype(dt))],
                       generator="numpy X / (sqrt(x^T theta x) + eps)")
            nb = B / (np.sqrt(qb.swapaxes(-1, -2)) + eps)
            yield dict(op="cosine_kernel", dtype=dt, name=f"lak_cosine_theta_{nm}_{t}",
                       inputs=[("X0.npy", xb0), ("X1.npy", xb1), ("theta.npy", th)],
                       outputs=[("K.npy", (na @ T @ np.swapaxes(nb, -1, -2)).astype(dt))],
                       generator="numpy normalised rows, then x^T theta y")
        yield dict(op="parameterised_norm", dtype=dt, name=f"lak_norm_squared_{t}",
                   inputs=[("X.npy", x0)],
                   outputs=[("Y.npy", (a / ((a * a).sum(-1, keepdims=True)
                                            + np.finfo(dt).eps)).astype(dt))],
                   options=[("squared", "true")], generator="numpy X / (|x|^2 + eps)")
