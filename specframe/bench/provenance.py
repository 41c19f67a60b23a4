"""What produced a result: the git revision of the specframe checkout and the versions of loaded plugins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import specframe
from specframe.plugins import PluginHost


def git_revision(directory: str | Path | None = None) -> str | None:
    """``<12-hex commit>`` (``+dirty`` with uncommitted changes) of the checkout holding specframe, or None."""
    where = Path(directory) if directory is not None else Path(specframe.__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head or None


def plugin_versions(host: PluginHost) -> dict[str, str]:
    """``{distribution: version}`` of specframe and every plugin loaded from a distribution."""
    versions = {"specframe": specframe.__version__}
    for info in host.plugins():
        if info.distribution not in ("<in-process>", "?"):
            versions[info.distribution] = info.version
    return versions
