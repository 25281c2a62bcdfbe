"""Shared helpers of the binding tests: random inputs with realistic gate
ranges, relative-error checks, and per-dtype tolerances (fp32 arithmetic of
the cpu backend against the fp64 reference)."""
import numpy as np
import pytest

import replayssm

TOL = {"float32": 2e-4, "float16": 2e-2}


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def assert_close(a, b, dtype="float32", what=""):
    e = rel_err(a, b)
    assert e <= TOL[str(np.dtype(dtype))], f"{what}: relative L2 error {e:.3g}"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def mamba2_inputs(rng, Bsz, T, H, P, N, G, dtype="float32", z=True):
    f = lambda *s: rng.standard_normal(s).astype(dtype)  # noqa: E731
    return dict(
        x=f(Bsz, T, H, P), dt=rng.uniform(-3.0, 1.0, (Bsz, T, H)).astype(np.float32),
        A=-np.exp(rng.uniform(-1.0, 1.5, H)).astype(np.float32),
        B=f(Bsz, T, G, N), C=f(Bsz, T, G, N), z=f(Bsz, T, H, P) if z else None,
        dt_bias=rng.uniform(-0.5, 0.5, H).astype(np.float32),
        D=rng.standard_normal(H).astype(np.float32))


def delta_inputs(rng, family, Bsz, T, H, HV, K, V, dtype="float32", raw=True):
    f = lambda *s: rng.standard_normal(s).astype(dtype)  # noqa: E731
    gshape = (Bsz, T, HV) if family == "gdn" else (Bsz, T, HV, K)
    d = dict(q=f(Bsz, T, H, K), k=f(Bsz, T, H, K), v=f(Bsz, T, HV, V))
    if raw:
        d.update(g=rng.uniform(-4.0, 2.0, gshape).astype(np.float32),
                 beta=rng.uniform(-2.0, 2.0, (Bsz, T, HV)).astype(np.float32),
                 A_log=rng.uniform(-2.0, 1.0, HV).astype(np.float32),
                 dt_bias=rng.uniform(-0.5, 0.5, (HV,) if family == "gdn" else (HV, K))
                 .astype(np.float32))
    else:
        d.update(g=-rng.uniform(0.01, 2.0, gshape).astype(np.float32),
                 beta=rng.uniform(0.1, 0.9, (Bsz, T, HV)).astype(np.float32))
    return d


def slots(*s):
    return np.array(s, dtype=np.int32)


def copy_pool(pool):
    import copy

    p = copy.copy(pool)
    for k, v in vars(pool).items():
        if isinstance(v, np.ndarray):
            setattr(p, k, v.copy())
    return p
