"""The one exception type the CLI turns into a single clear line."""


class FlashbedError(Exception):
    """A failure the user can act on: `str()` says what is wrong and what to do."""

    exit_code = 2


class HostToolMissing(FlashbedError):
    pass
