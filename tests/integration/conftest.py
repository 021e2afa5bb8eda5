import pytest

from flashbed.lab.kernel import ensure_kernel


@pytest.fixture(scope="session")
def kernel():
    """The real lab kernel (built on first use, then cached)."""
    return ensure_kernel()
