"""Ops from Python against live independent oracles: scipy.ndimage for morphology and smoothing,
NumPy for the semirings."""
import numpy as np
import pytest
import scipy.ndimage as ndi

import nitrix

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


@pytest.mark.parametrize("mode", MODES)
def test_grey_morphology_matches_scipy(rng, mode):
    x = rng.normal(size=(7, 6, 5))
    for fn, ref in ((nitrix.morphology.dilate, ndi.grey_dilation),
                    (nitrix.morphology.erode, ndi.grey_erosion),
                    (nitrix.morphology.open, ndi.grey_opening),
                    (nitrix.morphology.close, ndi.grey_closing)):
        got = fn(x, size=(3, 1, 5), mode=mode)
        want = ref(x, size=(3, 1, 5), mode=mode)
        np.testing.assert_array_equal(got, want)  # max/min select values: exact


def test_median_filter_matches_scipy(rng):
    x = rng.normal(size=(9, 8)).astype(np.float32)
    np.testing.assert_array_equal(nitrix.morphology.median_filter(x, size=3, mode="nearest"),
                                  ndi.median_filter(x, size=3, mode="nearest"))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_gaussian_matches_scipy(rng, dtype, rtol):
    x = rng.random((12, 10, 9)).astype(dtype)
    for sigma, mode in ((2.0, "reflect"), ((1.0, 0.5, 1.5), "nearest"), (0.8, "wrap")):
        got = nitrix.smoothing.gaussian(x, sigma=sigma, mode=mode)
        want = ndi.gaussian_filter(x.astype(np.float64), sigma=sigma, mode=mode)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def test_distance_transforms_match_scipy(rng):
    mask = (rng.random((9, 11)) > 0.2).astype(np.uint8)
    got = nitrix.morphology.distance_transform_edt(mask, sampling=(1.0, 2.0))
    np.testing.assert_allclose(got, ndi.distance_transform_edt(mask, sampling=(1.0, 2.0)),
                               rtol=1e-6)
    got = nitrix.morphology.distance_transform(mask, metric="taxicab")
    np.testing.assert_array_equal(got, ndi.distance_transform_cdt(mask, metric="taxicab"))


def test_connected_components_match_scipy(rng):
    mask = rng.random((10, 12)) > 0.6
    labels, count = nitrix.morphology.connected_components(mask.astype(np.uint8))
    want, n = ndi.label(mask)
    assert int(count) == n and count.shape == () and count.dtype == np.int64
    np.testing.assert_array_equal(labels, want)


def test_grid_laplacian_matches_scipy(rng):
    x = rng.normal(size=(6, 7, 5))
    np.testing.assert_allclose(nitrix.sparse.grid_laplacian(x), ndi.laplace(x, mode="reflect"),
                               rtol=1e-12, atol=1e-12)


def test_semiring_matmul_matches_numpy(rng):
    a = rng.normal(size=(2, 4, 5))
    b = rng.normal(size=(5, 3))
    mm = nitrix.semiring.semiring_matmul
    np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-12)
    np.testing.assert_array_equal(mm(a, b, semiring="TROPICAL_MAX_PLUS"),
                                  (a[..., :, :, None] + b[None, None]).max(axis=-2))
    np.testing.assert_array_equal(mm(a, b, semiring="tropical_min_plus"),
                                  (a[..., :, :, None] + b[None, None]).min(axis=-2))
    lse = np.log(np.exp(a[..., :, :, None] + b[None, None]).sum(axis=-2))
    np.testing.assert_allclose(mm(a, b, semiring="LOG"), lse, rtol=1e-12)
    eu = np.sqrt(((a[..., :, :, None] - b[None, None]) ** 2).sum(axis=-2))
    np.testing.assert_allclose(mm(a, b, semiring="EUCLIDEAN"), eu, rtol=1e-12)


def test_vjp_of_gaussian_is_its_adjoint(rng):
    # gaussian is linear and, under mode=wrap, self-adjoint: <dy, G x> = <G dy, x>
    x = rng.normal(size=(8, 9))
    dy = rng.normal(size=(8, 9))
    (dx,) = nitrix.vjp("gaussian", (x,), dy, sigma=1.2, mode="wrap")
    want = ndi.gaussian_filter(dy, sigma=1.2, mode="wrap")
    np.testing.assert_allclose(dx, want, rtol=1e-10, atol=1e-12)


def test_vjp_of_dilate_routes_to_the_winner(rng):
    x = rng.permutation(30).reshape(5, 6).astype(np.float64)  # distinct: no ties
    dy = rng.normal(size=x.shape)
    (dx,) = nitrix.vjp("dilate", (x,), dy, size=3, mode="nearest")
    want = np.zeros_like(x)
    pad = np.pad(x, 1, mode="edge")
    for i in range(5):
        for j in range(6):
            w = pad[i:i + 3, j:j + 3]
            a, b = np.unravel_index(np.argmax(w), w.shape)
            want[min(max(i + a - 1, 0), 4), min(max(j + b - 1, 0), 5)] += dy[i, j]
    np.testing.assert_allclose(dx, want, rtol=1e-12, atol=1e-12)
