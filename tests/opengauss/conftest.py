import pytest

from pgoutput_codec.opengauss.batch import decode_batch, decode_batch_py


@pytest.fixture(params=["compiled", "python"])
def batch_decoder(request):
    """decode_batch for the 'b' style, compiled and Python twin."""
    if request.param == "compiled":
        from pgoutput_codec.opengauss import _parse  # noqa: F401  (fails if not built)
        return lambda v, **kw: decode_batch(v, "b", **kw)
    return decode_batch_py
