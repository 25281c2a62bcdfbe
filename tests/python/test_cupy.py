"""CuPy arrays through the binding: zero-copy DLPack on the GPU, results equal
to the fp64 reference on numpy copies. Skips without cupy or a CUDA GPU."""
import numpy as np
import pytest

import replayssm
from conftest import assert_close, mamba2_inputs, slots

cp = pytest.importorskip("cupy")
if not replayssm.cuda_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

H, P, N, G = 4, 8, 16, 2
S = 6


def test_cupy_decode_matches_reference_in_place(rng):
    inp = mamba2_inputs(rng, 3, 1, H, P, N, G)
    state0 = rng.standard_normal((S, H, P, N)).astype(np.float32)
    sl = slots(4, -1, 2)
    st_ref = state0.copy()
    y_ref = replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], st_ref, sl,
                                    dt_bias=inp["dt_bias"], D=inp["D"], backend="reference")
    dev = {k: cp.asarray(v) for k, v in inp.items() if v is not None}
    st = cp.asarray(state0)
    ptr = st.data.ptr
    y = replayssm.mamba2_decode(dev["x"], dev["dt"], dev["A"], dev["B"], dev["C"], st,
                                cp.asarray(sl), dt_bias=dev["dt_bias"], D=dev["D"])
    cp.cuda.get_current_stream().synchronize()
    assert isinstance(y, cp.ndarray) and st.data.ptr == ptr  # written in place, no copy
    assert_close(cp.asnumpy(y), y_ref, what="y")
    assert_close(cp.asnumpy(st), st_ref, what="state")
