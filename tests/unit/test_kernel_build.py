

def test_source_extraction_uses_only_what_this_python_accepts():
    """Bookworm's Python 3.11.2 has no `filter` argument to extractall (3.11.4 added it): the
    kernel build passed it anyway and died with a TypeError on a stock Debian 12."""
    import inspect
    import tarfile

    from flashbed.lab.kernel import TAR_TRUSTED

    accepted = inspect.signature(tarfile.TarFile.extractall).parameters
    assert set(TAR_TRUSTED) <= set(accepted)
