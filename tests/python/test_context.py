"""Contexts, reproducible mode, the divergent-op registry, system information, threads and fork."""
import multiprocessing
import os
import threading

import numpy as np
import pytest

import nitrix


def test_explicit_context_settings(tmp_path):
    ctx = nitrix.Context(backend="ref", threads=2, cache_dir=tmp_path / "cache")
    assert ctx.backend == "ref" and ctx.threads == 2
    assert ctx.cache_dir == str(tmp_path / "cache")
    x = np.random.default_rng(1).random((5, 5))
    # the reference interpreter and the default backend agree on a max
    np.testing.assert_array_equal(nitrix.morphology.dilate(x, ctx=ctx),
                                  nitrix.morphology.dilate(x))
    with ctx:
        pass
    assert "closed" in repr(ctx)


def test_default_context_is_lazy_and_shared():
    a = nitrix.default_context()
    assert a is nitrix.default_context()
    assert a.threads >= 1
    mine = nitrix.Context(threads=1)
    nitrix.set_default_context(mine)
    try:
        assert nitrix.default_context() is mine
    finally:
        nitrix.set_default_context(a)


def test_reproducible_nests_per_thread():
    ctx = nitrix.default_context()
    base = ctx.reproducible_mode
    seen = []
    with nitrix.reproducible():
        assert ctx.reproducible_mode
        t = threading.Thread(target=lambda: seen.append(ctx.reproducible_mode))
        t.start()
        t.join()
        with nitrix.reproducible(False):
            assert not ctx.reproducible_mode
        assert ctx.reproducible_mode
    assert ctx.reproducible_mode == base
    assert seen == [base]  # another thread is not inside this scope


def test_reproducible_picks_canonical_drivers():
    rows = {r["op"]: r for r in nitrix.divergent_ops()}
    g = rows["gaussian_filter"]
    assert g["canonical"] == "fir" and "recursive" in g["drivers"]
    x = np.random.default_rng(2).random((16, 16)).astype(np.float32)
    with nitrix.reproducible():
        y = nitrix.smoothing.gaussian(x, sigma=2.0)
    np.testing.assert_array_equal(y, nitrix.smoothing.gaussian(x, sigma=2.0, driver="fir"))


def test_divergent_ops_rows():
    rows = nitrix.divergent_ops()
    assert rows
    for r in rows:
        assert r["canonical"] in r["drivers"] and r["fast"] in r["drivers"]
        assert r["rtol"] >= 0 and r["atol"] >= 0 and r["reason"]
        assert r["auto_fast"] == (r["rtol"] <= 1e-3 and r["atol"] <= 1e-3)


def test_info():
    i = nitrix.info()
    assert i["version"] == nitrix.__version__
    assert i["cpu"]["cores"] >= 1 and i["llvm_version"]
    assert isinstance(i["gpus"], list) and i["cuda"]["status"]
    assert os.path.exists(i["library"])


def test_threads_share_a_context():
    x = np.random.default_rng(3).random((12, 12))
    want = nitrix.smoothing.gaussian(x, sigma=1.5)
    out = [None] * 4

    def work(k):
        out[k] = nitrix.smoothing.gaussian(x, sigma=1.5)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o in out:
        np.testing.assert_array_equal(o, want)


def _child(q):
    x = np.arange(16.0).reshape(4, 4)
    q.put(nitrix.morphology.dilate(x, size=3).tolist())


def test_fork_after_use():
    # the parent has run parallel work on its default context; a forked child makes its own
    big = np.random.default_rng(4).random((64, 64, 32)).astype(np.float32)
    nitrix.smoothing.gaussian(big, sigma=1.0)
    mp = multiprocessing.get_context("fork")
    q = mp.Queue()
    p = mp.Process(target=_child, args=(q,))
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=60)
    assert p.exitcode == 0
    want = nitrix.morphology.dilate(np.arange(16.0).reshape(4, 4), size=3)
    np.testing.assert_array_equal(np.array(got), want)


def test_parent_context_refuses_in_child():
    ctx = nitrix.Context(threads=1)
    mp = multiprocessing.get_context("fork")
    q = mp.Queue()

    def child():
        try:
            nitrix.core.copy(np.zeros(2), ctx=ctx)
            q.put("ran")
        except nitrix.InvalidArgumentError as e:
            q.put(str(e))

    p = mp.Process(target=child)
    p.start()
    msg = q.get(timeout=60)
    p.join(timeout=60)
    assert "before os.fork()" in msg
