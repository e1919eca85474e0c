"""Affine and Lie ops of the geometry family: oracles in float64 SciPy/NumPy, never nitrix.

rigid_exp / rigid_log: scipy.spatial.transform.Rotation (from_rotvec / as_rotvec; 2-D: cos, sin,
atan2). affine_exp: scipy.linalg.expm of the generator. angles_to_rotation_matrix /
rotation_matrix_to_angles: Rotation.from_euler / as_euler("XYZ"). params_to_affine_matrix: T R S
E assembled from Rotation and explicit factors; affine_matrix_to_params: the parameters a matrix
was assembled from (the ground truth). apply_affine, affine_grid, make_square_affine,
compose_affine: NumPy products; invert_affine: numpy.linalg.inv; fit_affine: numpy.linalg.lstsq
on sqrt(w)-scaled rows."""
import numpy as np
import scipy.linalg
from scipy.spatial.transform import Rotation

PREFIX = "lie_"


def rot2(theta):
    c, s = np.cos(theta), np.sin(theta)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def homog(lin, t):
    d = lin.shape[-1]
    top = np.concatenate([lin, t[..., None]], -1)
    bottom = np.zeros(lin.shape[:-2] + (1, d + 1))
    bottom[..., 0, d] = 1.0
    return np.concatenate([top, bottom], -2)


def euler3(ang_deg):
    flat = ang_deg.reshape(-1, 3)
    return Rotation.from_euler("XYZ", flat, degrees=True).as_matrix().reshape(ang_deg.shape[:-1]
                                                                             + (3, 3))


def params_matrix(par, d, deg=True, shift_scale=False):
    """T R S E from full parameter vectors, in float64 (the assembly the op documents)."""
    nr = 1 if d == 2 else 3
    t = par[..., :d]
    ang = par[..., d:d + nr]
    s = par[..., d + nr:2 * d + nr] + (1.0 if shift_scale else 0.0)
    sh = par[..., 2 * d + nr:]
    if d == 2:
        r = rot2(np.deg2rad(ang[..., 0]) if deg else ang[..., 0])
    else:
        r = euler3(ang if deg else np.rad2deg(ang))
    e = np.zeros(par.shape[:-1] + (d, d))
    e[..., range(d), range(d)] = 1.0
    iu = np.triu_indices(d, 1)
    e[..., iu[0], iu[1]] = sh
    lin = r @ (s[..., :, None] * e)
    return np.concatenate([lin, t[..., None]], -1)


def random_affine(rng, batch, d, spread=0.3):
    lin = np.eye(d) + spread * rng.standard_normal(batch + (d, d))
    t = rng.standard_normal(batch + (d,)) * 3
    return np.concatenate([lin, t[..., None]], -1)


def cases(rng):
    out = []
    for dt in (np.float64, np.float32):
        tn = np.dtype(dt).name
        # rigid_exp, 3-D: a batch including w = 0, a tiny w and a rotation near pi.
        w = rng.standard_normal((2, 4, 3))
        w[0, 0] = 0.0
        w[0, 1] = [1e-9, -2e-9, 3e-9]
        w[1, 0] = np.array([1.0, 2.0, -2.0]) / 3.0 * 3.1
        t = rng.standard_normal((2, 4, 3))
        rot = Rotation.from_rotvec(w.reshape(-1, 3)).as_matrix().reshape(2, 4, 3, 3)
        par = np.concatenate([w, t], -1)
        out.append(dict(name=f"lie_rigid_exp_3d_{tn}", op="rigid_exp", dtype=dt,
                        inputs=[("params.npy", par.astype(dt))],
                        outputs=[("matrix.npy", homog(rot, t).astype(dt))],
                        generator="scipy Rotation.from_rotvec, translation as given"))
        th = rng.uniform(-3, 3, size=(5,))
        t2 = rng.standard_normal((5, 2))
        out.append(dict(name=f"lie_rigid_exp_2d_{tn}", op="rigid_exp", dtype=dt,
                        inputs=[("params.npy", np.concatenate([th[:, None], t2], -1).astype(dt))],
                        outputs=[("matrix.npy", homog(rot2(th), t2).astype(dt))],
                        options=[("ndim", "2")], generator="numpy cos/sin rotation"))
        # rigid_log: random rotations, one near pi, one the identity; square and 3x4 forms.
        rv = Rotation.random(6, random_state=rng.randint(1 << 30)).as_rotvec()
        rv[0] = 0.0
        rv[1] = np.array([0.6, -0.0, 0.8]) * (np.pi - 1e-3)
        rv[2] = np.array([0.0, 0.6, 0.8]) * 2.5
        tt = rng.standard_normal((6, 3))
        m = homog(Rotation.from_rotvec(rv).as_matrix(), tt)
        want = np.concatenate([Rotation.from_matrix(m[:, :3, :3]).as_rotvec(), tt], -1)
        out.append(dict(name=f"lie_rigid_log_3d_{tn}", op="rigid_log", dtype=dt,
                        inputs=[("matrix.npy", m.astype(dt))], outputs=[("params.npy",
                                                                         want.astype(dt))],
                        generator="scipy Rotation.as_rotvec"))
        out.append(dict(name=f"lie_rigid_log_3x4_{tn}", op="rigid_log", dtype=dt,
                        inputs=[("matrix.npy", m[:, :3].astype(dt))],
                        outputs=[("params.npy", want.astype(dt))], options=[("ndim", "3")],
                        generator="scipy Rotation.as_rotvec"))
        th = rng.uniform(-3, 3, size=(2, 3))
        t2 = rng.standard_normal((2, 3, 2))
        out.append(dict(name=f"lie_rigid_log_2d_{tn}", op="rigid_log", dtype=dt,
                        inputs=[("matrix.npy", homog(rot2(th), t2).astype(dt))],
                        outputs=[("params.npy", np.concatenate([th[..., None], t2],
                                                               -1).astype(dt))],
                        generator="numpy atan2"))
        # affine_exp: generators of 1-norm from 0.05 to about 20 (0 to 3 squarings and more).
        norms = [0.05, 0.7, 3.0, 9.0, 20.0] if dt == np.float64 else [0.05, 0.7, 3.0]
        a = rng.standard_normal((len(norms), 3, 3))
        a = a / np.abs(a).sum(-2).max(-1)[:, None, None] * np.array(norms)[:, None, None]
        t = rng.standard_normal((len(norms), 3))
        e = np.stack([scipy.linalg.expm(x) for x in a])
        out.append(dict(name=f"lie_affine_exp_3d_{tn}", op="affine_exp", dtype=dt,
                        inputs=[("params.npy", np.concatenate([a.reshape(-1, 9), t],
                                                              -1).astype(dt))],
                        outputs=[("matrix.npy", homog(e, t).astype(dt))],
                        generator="scipy.linalg.expm of the generator"))
        a = rng.standard_normal((3, 2, 2)) * 0.8
        a[0] = [[0.0, -2.0], [2.0, 0.0]]
        t = rng.standard_normal((3, 2))
        e = np.stack([scipy.linalg.expm(x) for x in a])
        out.append(dict(name=f"lie_affine_exp_2d_{tn}", op="affine_exp", dtype=dt,
                        inputs=[("params.npy", np.concatenate([a.reshape(-1, 4), t],
                                                              -1).astype(dt))],
                        outputs=[("matrix.npy", homog(e, t).astype(dt))], options=[("ndim", "2")],
                        generator="scipy.linalg.expm of the generator"))
        # apply_affine: one matrix per batch element, with a centre; a single matrix; 2-D.
        mb = random_affine(rng, (2,), 3)
        x = rng.standard_normal((2, 4, 5, 3)) * 4
        c = np.array([1.5, -2.0, 0.5])
        y = np.einsum("bij,bpqj->bpqi", mb[..., :3], x - c) + mb[:, None, None, :, 3] + c
        out.append(dict(name=f"lie_apply_affine_batch_center_{tn}", op="apply_affine", dtype=dt,
                        inputs=[("coords.npy", x.astype(dt)), ("M.npy", mb.astype(dt)),
                                ("center.npy", c.astype(dt))],
                        outputs=[("y.npy", y.astype(dt))],
                        generator="numpy L (x - c) + t + c"))
        m1 = homog(random_affine(rng, (), 2)[..., :2], rng.standard_normal(2))
        x = rng.standard_normal((3, 7, 2))
        y = x @ m1[:2, :2].T + m1[:2, 2]
        out.append(dict(name=f"lie_apply_affine_2d_{tn}", op="apply_affine", dtype=dt,
                        inputs=[("coords.npy", x.astype(dt)), ("M.npy", m1.astype(dt))],
                        outputs=[("y.npy", y.astype(dt))], generator="numpy L x + t"))
        # affine_grid: default centre (shape - 1) / 2 and a given one; a batch of matrices.
        shape = (4, 5, 3)
        g = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in shape], indexing="ij"), -1)
        mb = random_affine(rng, (2,), 3)
        cc = (np.array(shape) - 1) / 2.0
        y = np.einsum("bij,xyzj->bxyzi", mb[..., :3], g - cc) + mb[:, None, None, None, :, 3] + cc
        out.append(dict(name=f"lie_affine_grid_batch_{tn}", op="affine_grid", dtype=dt,
                        inputs=[("M.npy", mb.astype(dt))], outputs=[("grid.npy", y.astype(dt))],
                        options=[("spatial_shape", "4,5,3")],
                        generator="numpy meshgrid, L (i - c) + t + c, c = (shape - 1) / 2"))
        m2 = homog(random_affine(rng, (), 2)[:, :2], rng.standard_normal(2))
        c2 = np.array([0.0, 0.0])
        g2 = np.stack(np.meshgrid(np.arange(6.0), np.arange(3.0), indexing="ij"), -1)
        y = g2 @ m2[:2, :2].T + m2[:2, 2]
        out.append(dict(name=f"lie_affine_grid_2d_origin_{tn}", op="affine_grid", dtype=dt,
                        inputs=[("M.npy", m2.astype(dt)), ("center.npy", c2.astype(dt))],
                        outputs=[("grid.npy", y.astype(dt))], options=[("spatial_shape", "6,3")],
                        generator="numpy meshgrid, L i + t"))
        # make_square_affine, invert_affine, compose_affine.
        ma = random_affine(rng, (3,), 3)
        out.append(dict(name=f"lie_make_square_affine_{tn}", op="make_square_affine", dtype=dt,
                        inputs=[("mat.npy", ma.astype(dt))],
                        outputs=[("square.npy", homog(ma[..., :3], ma[..., 3]).astype(dt))],
                        generator="numpy concatenate with [0 0 0 1]"))
        sq = homog(ma[..., :3], ma[..., 3])
        inv = np.linalg.inv(sq)
        out.append(dict(name=f"lie_invert_affine_{tn}", op="invert_affine", dtype=dt,
                        inputs=[("mat.npy", ma.astype(dt))],
                        outputs=[("inverse.npy", inv[:, :3].astype(dt))],
                        generator="numpy.linalg.inv of the square form"))
        out.append(dict(name=f"lie_invert_affine_square_{tn}", op="invert_affine", dtype=dt,
                        inputs=[("mat.npy", sq.astype(dt))],
                        outputs=[("inverse.npy", inv.astype(dt))],
                        generator="numpy.linalg.inv"))
        m2d = random_affine(rng, (4,), 2)
        inv2 = np.linalg.inv(homog(m2d[..., :2], m2d[..., 2]))
        out.append(dict(name=f"lie_invert_affine_2d_{tn}", op="invert_affine", dtype=dt,
                        inputs=[("mat.npy", m2d.astype(dt))],
                        outputs=[("inverse.npy", inv2[:, :2].astype(dt))],
                        generator="numpy.linalg.inv of the square form"))
        a, b, c3 = (random_affine(rng, (2,), 3) for _ in range(3))
        sqf = [homog(m[..., :3], m[..., 3]) for m in (a, b, c3)]
        out.append(dict(name=f"lie_compose_affine_two_{tn}", op="compose_affine", dtype=dt,
                        inputs=[("a.npy", a.astype(dt)), ("b.npy", sqf[1].astype(dt))],
                        outputs=[("y.npy", (sqf[0] @ sqf[1])[:, :3].astype(dt))],
                        generator="numpy product of the square forms"))
        out.append(dict(name=f"lie_compose_affine_three_{tn}", op="compose_affine", dtype=dt,
                        inputs=[("a.npy", sqf[0].astype(dt)), ("b.npy", b.astype(dt)),
                                ("c.npy", c3[0].astype(dt))],
                        outputs=[("y.npy", (sqf[0] @ sqf[1] @ sqf[2][0]).astype(dt))],
                        generator="numpy product of the square forms (c broadcast)"))
        # fit_affine: noisy correspondences, weighted and not.
        src_m = random_affine(rng, (2,), 3)
        tgt = rng.standard_normal((2, 12, 3)) * 5
        src = np.einsum("bij,bpj->bpi", src_m[..., :3], tgt) + src_m[:, None, :, 3]
        src = src + 0.05 * rng.standard_normal(src.shape)
        wts = rng.uniform(0.2, 2.0, size=(2, 12))
        xh = np.concatenate([tgt, np.ones((2, 12, 1))], -1)
        fit_w, fit_1 = [], []
        for k in range(2):
            sw = np.sqrt(wts[k])[:, None]
            fit_w.append(np.linalg.lstsq(sw * xh[k], sw * src[k], rcond=None)[0].T)
            fit_1.append(np.linalg.lstsq(xh[k], src[k], rcond=None)[0].T)
        out.append(dict(name=f"lie_fit_affine_weighted_{tn}", op="fit_affine", dtype=dt,
                        inputs=[("source.npy", src.astype(dt)), ("target.npy", tgt.astype(dt)),
                                ("weights.npy", wts.astype(dt))],
                        outputs=[("M.npy", np.stack(fit_w).astype(dt))],
                        generator="numpy.linalg.lstsq on sqrt(w)-scaled rows"))
        out.append(dict(name=f"lie_fit_affine_unweighted_{tn}", op="fit_affine", dtype=dt,
                        inputs=[("source.npy", src.astype(dt)), ("target.npy", tgt.astype(dt))],
                        outputs=[("M.npy", np.stack(fit_1).astype(dt))],
                        generator="numpy.linalg.lstsq"))
        # Euler angles.
        ang = rng.uniform(-170, 170, size=(2, 3, 3))
        ang[..., 1] = rng.uniform(-80, 80, size=(2, 3))
        out.append(dict(name=f"lie_angles_to_rotation_matrix_3d_{tn}",
                        op="angles_to_rotation_matrix", dtype=dt,
                        inputs=[("ang.npy", ang.astype(dt))],
                        outputs=[("R.npy", euler3(ang).astype(dt))],
                        generator='scipy Rotation.from_euler("XYZ", degrees=True)'))
        th = rng.uniform(-3, 3, size=(4, 1))
        out.append(dict(name=f"lie_angles_to_rotation_matrix_2d_rad_{tn}",
                        op="angles_to_rotation_matrix", dtype=dt,
                        inputs=[("ang.npy", th.astype(dt))],
                        outputs=[("R.npy", rot2(th[:, 0]).astype(dt))], options=[("deg", "false")],
                        generator="numpy cos/sin"))
        rr = Rotation.random(7, random_state=rng.randint(1 << 30))
        out.append(dict(name=f"lie_rotation_matrix_to_angles_3d_{tn}",
                        op="rotation_matrix_to_angles", dtype=dt,
                        inputs=[("mat.npy", rr.as_matrix().astype(dt))],
                        outputs=[("ang.npy", rr.as_euler("XYZ", degrees=True).astype(dt))],
                        generator='scipy Rotation.as_euler("XYZ", degrees=True)'))
        sq3 = homog(rr.as_matrix(), rng.standard_normal((7, 3)))
        out.append(dict(name=f"lie_rotation_matrix_to_angles_affine_rad_{tn}",
                        op="rotation_matrix_to_angles", dtype=dt,
                        inputs=[("mat.npy", sq3.astype(dt))],
                        outputs=[("ang.npy", rr.as_euler("XYZ").astype(dt))],
                        options=[("deg", "false")],
                        generator='scipy Rotation.as_euler("XYZ") of the leading 3x3 block'))
        th = rng.uniform(-3.1, 3.1, size=(3,))
        out.append(dict(name=f"lie_rotation_matrix_to_angles_2d_{tn}",
                        op="rotation_matrix_to_angles", dtype=dt,
                        inputs=[("mat.npy", rot2(th).astype(dt))],
                        outputs=[("ang.npy", np.rad2deg(th)[:, None].astype(dt))],
                        generator="numpy, the angle the rotation was made from"))
        # params <-> matrix.
        par = np.concatenate([rng.standard_normal((2, 3, 3)) * 5,
                              rng.uniform(-60, 60, size=(2, 3, 3)),
                              rng.uniform(0.6, 1.6, size=(2, 3, 3)),
                              rng.uniform(-0.3, 0.3, size=(2, 3, 3))], -1)
        out.append(dict(name=f"lie_params_to_affine_matrix_3d_{tn}",
                        op="params_to_affine_matrix", dtype=dt,
                        inputs=[("par.npy", par.astype(dt))],
                        outputs=[("M.npy", params_matrix(par, 3).astype(dt))],
                        generator="T R S E with scipy Rotation.from_euler(\"XYZ\")"))
        short = par[0, :, :6]
        full = np.concatenate([short, np.ones((3, 3)), np.zeros((3, 3))], -1)
        out.append(dict(name=f"lie_params_to_affine_matrix_rigid_{tn}",
                        op="params_to_affine_matrix", dtype=dt,
                        inputs=[("par.npy", short.astype(dt))],
                        outputs=[("M.npy", params_matrix(full, 3).astype(dt))],
                        generator="T R with scipy Rotation.from_euler(\"XYZ\")"))
        p2 = np.concatenate([rng.standard_normal((4, 2)), rng.uniform(-1, 1, (4, 1)),
                             rng.uniform(-0.3, 0.3, (4, 2)), rng.uniform(-0.3, 0.3, (4, 1))], -1)
        out.append(dict(name=f"lie_params_to_affine_matrix_2d_shift_{tn}",
                        op="params_to_affine_matrix", dtype=dt,
                        inputs=[("par.npy", p2.astype(dt))],
                        outputs=[("M.npy", params_matrix(p2, 2, deg=False,
                                                         shift_scale=True).astype(dt))],
                        options=[("ndim", "2"), ("deg", "false"), ("shift_scale", "true")],
                        generator="T R S E, radians, scale + 1"))
        pr = par.copy()
        pr[1, :, 6] *= -1.0  # reflections: det < 0, the sign on the first scale
        out.append(dict(name=f"lie_affine_matrix_to_params_3d_{tn}",
                        op="affine_matrix_to_params", dtype=dt,
                        inputs=[("mat.npy", params_matrix(pr, 3).astype(dt))],
                        outputs=[("par.npy", pr.astype(dt))],
                        generator="the parameters the matrix was assembled from (T R S E)"))
        p2r = p2.copy()
        p2r[:, 3:5] += 1.0
        out.append(dict(name=f"lie_affine_matrix_to_params_2d_rad_{tn}",
                        op="affine_matrix_to_params", dtype=dt,
                        inputs=[("mat.npy", params_matrix(p2r, 2, deg=False).astype(dt))],
                        outputs=[("par.npy", p2r.astype(dt))], options=[("deg", "false")],
                        generator="the parameters the matrix was assembled from (T R S E)"))
    return out
