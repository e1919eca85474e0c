"""nitrix inside Dask: map_overlap of gaussian over chunks equals one call on the whole volume
(depth = the kernel radius, int(truncate * sigma + 0.5) as scipy)."""
import numpy as np
import pytest

import nitrix

da = pytest.importorskip("dask.array")


@pytest.mark.parametrize("mode", ["reflect", "nearest"])
def test_map_overlap_gaussian_equals_one_call(mode):
    rng = np.random.default_rng(5)
    vol = rng.random((40, 36, 30)).astype(np.float64)
    sigma, truncate = 1.5, 4.0
    radius = int(truncate * sigma + 0.5)
    whole = nitrix.smoothing.gaussian(vol, sigma=sigma, mode=mode)
    d = da.from_array(vol, chunks=(20, 18, 15))
    boundary = {"reflect": "reflect", "nearest": "nearest"}[mode]
    out = d.map_overlap(lambda b: nitrix.smoothing.gaussian(b, sigma=sigma, mode=mode),
                        depth=radius, boundary=boundary, dtype=vol.dtype)
    got = out.compute(scheduler="threads")
    np.testing.assert_allclose(got, whole, rtol=1e-12, atol=1e-14)
