"""Shared by the random family's case modules: jax with its pinned defaults, the x64 and
jax_threefry_partitionable switches, and the raw uint32 keys jax.random.PRNGKey gives."""
import contextlib

import numpy as np
import jax
from jax.experimental import enable_x64


@contextlib.contextmanager
def mode(x64=False, partitionable=False):
    old = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", partitionable)
    try:
        with enable_x64(x64):
            yield
    finally:
        jax.config.update("jax_threefry_partitionable", old)


def key(seed):
    with enable_x64(True):
        return np.asarray(jax.random.PRNGKey(seed), dtype=np.uint32)


def np_(x):
    return np.asarray(x)
