"""Errors the CLI turns into one clear line and an exit code (README.md, "Use")."""


class Stm32aiError(Exception):
    """Bad input or usage: the CLI prints the message and exits 2."""

    exit_code = 2


class UnsupportedModelError(Stm32aiError):
    """The model uses operators, types or shapes we cannot compile."""


class CheckFailed(Exception):
    """The model ran but results or checks failed: exit 1."""

    exit_code = 1
