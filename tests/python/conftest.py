"""The pytest suite of the Python package. tests/python/run-pytest.sh runs it against the build's
library (NITRIX_LIBRARY) and the package sources (PYTHONPATH); it also runs against an installed
package when those are unset."""
import os

import numpy as np
import pytest

import nitrix

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def rng():
    return np.random.default_rng(20261207)


@pytest.fixture(scope="session")
def ctx():
    return nitrix.default_context()
