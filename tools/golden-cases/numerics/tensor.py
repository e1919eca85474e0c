"""The tensor utilities (docs/numerics.md) against NumPy indexing and reshapes: take with
flatnonzero, broadcast_to, reshape, transpose, written here from hypercoil's definitions."""
import numpy as np

PREFIX = "tensor_"


def nm(op, tag, dt):
    return f"tensor_{op}_{tag}_{np.dtype(dt).name}"


def cases(rng):
    for dt in (np.float64, np.float32):
        x = rng.standard_normal((3, 4, 6)).astype(dt)
        m = np.array([1, 0, 1, 1, 0, 1], bool)
        yield dict(name=nm("apply_mask", "a_last", dt), op="apply_mask", dtype=dt,
                   inputs=[("x.npy", x), ("mask.npy", m)], outputs=[("y.npy", x[..., m])],
                   generator="numpy x[..., mask]")
        m1 = np.array([0, 3, 0, 1], np.int32)
        yield dict(name=nm("apply_mask", "b_axis1_int", dt), op="apply_mask", dtype=dt,
                   inputs=[("x.npy", x), ("mask.npy", m1)],
                   outputs=[("y.npy", x.take(np.flatnonzero(m1), axis=1))],
                   options=[("axis", "1")], generator="numpy x.take(flatnonzero(mask), axis=1)")
        w = rng.uniform(0.1, 1, size=(4,)).astype(dt)
        yield dict(name=nm("conform_mask", "a_weights_axis1", dt), op="conform_mask", dtype=dt,
                   inputs=[("x.npy", x), ("mask.npy", w)],
                   outputs=[("y.npy", np.broadcast_to(w.reshape(1, 4, 1), x.shape).copy())],
                   options=[("axis", "1")],
                   generator="numpy broadcast_to(mask.reshape(1, 4, 1), x.shape)")
        a = rng.standard_normal((5, 3, 3)).astype(dt)
        b = rng.standard_normal((2, 1, 3, 4)).astype(dt)
        yield dict(name=nm("broadcast_ignoring", "a_matrices", dt), op="broadcast_ignoring",
                   dtype=dt, inputs=[("a.npy", a), ("b.npy", b)],
                   outputs=[("a_out.npy", np.broadcast_to(a, (2, 5, 3, 3)).copy()),
                            ("b_out.npy", np.broadcast_to(b, (2, 5, 3, 4)).copy())],
                   options=[("ignore_axes", "-1")],
                   generator="numpy broadcast_to of both to the batch (2, 5) and axis -2, each "
                             "keeping its own last axis")
        c = rng.standard_normal((4, 1)).astype(dt)
        d = rng.standard_normal((3, 1, 7)).astype(dt)
        yield dict(name=nm("broadcast_ignoring", "b_two_ignored", dt), op="broadcast_ignoring",
                   dtype=dt, inputs=[("a.npy", c), ("b.npy", d)],
                   outputs=[("a_out.npy", np.broadcast_to(c.reshape(1, 4, 1), (3, 4, 1)).copy()),
                            ("b_out.npy", d.copy())],
                   options=[("ignore_axes", "-2,-1")],
                   generator="numpy: a promoted to (1, 4, 1), axis 0 broadcast; axes -2, -1 kept")
        yield dict(name=nm("fold_axis", "a_middle", dt), op="fold_axis", dtype=dt,
                   inputs=[("x.npy", x)], outputs=[("y.npy", x.reshape(3, 4, 3, 2))],
                   options=[("axis", "-1"), ("n", "2")], generator="numpy x.reshape(3, 4, 3, 2)")
        yield dict(name=nm("fold_axis", "b_first", dt), op="fold_axis", dtype=dt,
                   inputs=[("x.npy", x)], outputs=[("y.npy", x.reshape(1, 3, 4, 6))],
                   options=[("axis", "0"), ("n", "3")], generator="numpy x.reshape(1, 3, 4, 6)")
        yield dict(name=nm("unfold_axes", "a_last_two", dt), op="unfold_axes", dtype=dt,
                   inputs=[("x.npy", x)], outputs=[("y.npy", x.reshape(3, 24))],
                   options=[("axes", "-2,-1")], generator="numpy x.reshape(3, 24)")
        yield dict(name=nm("unfold_axes", "b_first_two", dt), op="unfold_axes", dtype=dt,
                   inputs=[("x.npy", x)], outputs=[("y.npy", x.reshape(12, 6))],
                   options=[("axes", "1,0")], generator="numpy x.reshape(12, 6)")
        v = rng.standard_normal((5,)).astype(dt)
        yield dict(name=nm("orient_and_conform", "a_vector", dt), op="orient_and_conform",
                   dtype=dt, inputs=[("x.npy", v)], outputs=[("y.npy", v.reshape(1, 5, 1, 1))],
                   options=[("axis", "-3"), ("dim", "4")], generator="numpy v.reshape(1, 5, 1, 1)")
        mat = rng.standard_normal((2, 3)).astype(dt)
        yield dict(name=nm("orient_and_conform", "b_swapped", dt), op="orient_and_conform",
                   dtype=dt, inputs=[("x.npy", mat)],
                   outputs=[("y.npy", mat.T.reshape(3, 1, 2))],
                   options=[("axis", "2,0"), ("dim", "3")],
                   generator="numpy x.T.reshape(3, 1, 2): axis 0 of x to position 2, axis 1 to 0")
        yield dict(name=nm("promote_to_rank", "a_up", dt), op="promote_to_rank", dtype=dt,
                   inputs=[("x.npy", mat)], outputs=[("y.npy", mat.reshape(1, 1, 2, 3))],
                   options=[("rank", "4")], generator="numpy x.reshape(1, 1, 2, 3)")
        yield dict(name=nm("promote_to_rank", "b_already", dt), op="promote_to_rank", dtype=dt,
                   inputs=[("x.npy", x)], outputs=[("y.npy", x)], options=[("rank", "2")],
                   generator="numpy: x unchanged (its rank 3 >= 2)")
    xi = rng.randint(0, 9, size=(2, 5)).astype(np.int32)
    mb = np.array([True, False, False, True, True])
    yield dict(name=nm("apply_mask", "c_int32", np.int32), op="apply_mask", dtype=np.int32,
               inputs=[("x.npy", xi), ("mask.npy", mb)], outputs=[("y.npy", xi[:, mb])],
               generator="numpy x[:, mask] of an int32 array")
    yield dict(name=nm("conform_mask", "b_bool", bool), op="conform_mask", dtype=bool,
               inputs=[("x.npy", xi.astype(np.float32)), ("mask.npy", mb)],
               outputs=[("y.npy", np.broadcast_to(mb, (2, 5)).copy())],
               generator="numpy broadcast_to(mask, x.shape) of a bool mask (hypercoil's tile)")
