"""User-facing errors: one screen, no traceback, always with a hint on how to fix it; and contract violations.

Every error that bad input can cause derives from :class:`SpecframeError`. The CLI catches it, prints
:meth:`SpecframeError.render` and exits with status 2; library users get an ordinary exception whose
``str()`` is the same text.

:class:`ContractError` is the other kind: a component broke its interface contract (a verifier returned a
path that is not a path, a builder a tree its pruner cannot cut). That is a bug in the plugin, not in the
user's input, so it is not a :class:`SpecframeError`: it names the component and the distribution that ships
it, and the CLI prints it with its traceback (exit status 1) for the plugin's authors.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SpecframeError(Exception):
    """An error caused by the user's input (a file, a field, a value), with a fix.

    Args:
        message: what is wrong, naming the file, field or value.
        hint: how to fix it (one or two lines).
        where: optional location, such as ``pipeline.yaml:12`` or ``tree_builder.width``.
    """

    def __init__(self, message: str, *, hint: str = "", where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where

    def render(self) -> str:
        lines = []
        if self.where:
            lines.append(f"{self.where}: {self.message}")
        else:
            lines.append(self.message)
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class ConfigError(SpecframeError):
    """A pipeline or recipe file is malformed or invalid."""


class PluginError(SpecframeError):
    """A plugin failed to load, or two plugins clash."""


class CheckpointError(SpecframeError):
    """A checkpoint directory is missing files or does not fit the target."""


class GenerationError(SpecframeError):
    """Bad arguments to a decode call (prompt too long, bad sampling values, ...)."""


class ContractError(Exception):
    """A component violated its interface contract (a plugin bug).

    Args:
        message: what the component did, with the values seen.
        stage: the stage at fault (``verifier``, ``tree_builder``, ...), when the raiser knows it; the pipeline
            then fills in ``component`` and ``distribution`` from the registry.
        component: the component's registered name.
        distribution: the distribution that provides it.
    """

    def __init__(self, message: str, *, stage: str = "", component: str = "", distribution: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.component = component
        self.distribution = distribution

    def render(self) -> str:
        who = f"{self.stage} '{self.component}'" if self.component else (self.stage or "a component")
        source = f" (distribution {self.distribution})" if self.distribution else ""
        return (f"{who}{source} broke its contract: {self.message}\n"
                f"this is a bug in {self.distribution or 'the plugin providing it'}, not in your input; "
                "please report it to its authors")

    def __str__(self) -> str:
        return self.render()


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
