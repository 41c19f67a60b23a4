"""Pytest marker names shared by the conformance suite (which applies them) and specframe's pytest plugin
(which declares them and acts on them), kept apart so neither imports the other's module for a name."""

from __future__ import annotations

#: A conformance contract with no case of its stage kind in a suite: the pytest plugin deselects it.
UNUSED_MARK = "specframe_conformance_unused"
