"""`PluginHost`: a typed facade over pluggy that discovers plugins and builds the component registry.

Discovery goes through the ``specframe`` entry-point group; first-party plugins under ``plugins/`` use it
exactly like third-party packages. Loading is lazy (on first use) and idempotent. Environment switches:

* ``SPECFRAME_DISABLE_PLUGIN_AUTOLOAD=1``: load no entry points (in-process ``register`` still works);
* ``SPECFRAME_LOAD_PLUGINS=a,b``: allowlist of entry-point or distribution names (empty string = none);
* ``SPECFRAME_DISABLED_PLUGINS=a,b``: blocklist of entry-point or distribution names;
* ``SPECFRAME_TRACE_PLUGINS=1``: print every hook call and its result to stderr.

The core's own stages (:mod:`specframe.builtin`) are a plugin too, declared as the ``builtin`` entry point of
specframe's own distribution (``pyproject.toml``) and loaded by the same path (``EntryPoint.load``, then
registered under its name) by every host, whatever the switches say, as pytest loads its own plugins: the AR
baseline and the stages a pipeline file may leave out are built from them. Naming ``builtin`` in
``SPECFRAME_DISABLED_PLUGINS`` is a warning; another distribution's entry point called ``builtin`` is refused as
broken.

The host is an object, not a module singleton, so tests build a fresh one each time. Pluggy is used only
here, while pipelines and the CLI are built; the decode loop never calls a hook.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pluggy

from specframe import hookspecs
from specframe.errors import PluginError, did_you_mean
from specframe.hookspecs import hookimpl as hookimpl  # re-exported: plugins mark their hooks with it
from specframe.registry import ComponentRegistry, ComponentSpec

ENTRY_POINT_GROUP = "specframe"

#: Registration hook per stage kind; each yields ComponentSpec records of that kind.
REGISTRATION_HOOKS: dict[str, str] = {
    "target": "specframe_target_adapters",
    "drafter": "specframe_drafters",
    "corrector": "specframe_correctors",
    "tree_builder": "specframe_tree_builders",
    "pruner": "specframe_pruners",
    "verifier": "specframe_verifiers",
}

#: Plugin name of the core's built-in stages: the name of their entry point in specframe's distribution.
BUILTIN_PLUGIN = "builtin"
#: The distribution that ships the core (and the ``builtin`` entry point).
CORE_DISTRIBUTION = "specframe"


def builtin_entry_point() -> md.EntryPoint:
    """The ``builtin`` entry point of specframe's own distribution (read from its metadata, so a test that fakes
    the global entry-point list still gets the core's stages)."""
    try:
        eps = md.distribution(CORE_DISTRIBUTION).entry_points
    except md.PackageNotFoundError:
        eps = ()
    found = [ep for ep in eps if ep.group == ENTRY_POINT_GROUP and ep.name == BUILTIN_PLUGIN]
    if not found:
        raise PluginError(f"specframe's own entry point '{BUILTIN_PLUGIN}' (group '{ENTRY_POINT_GROUP}') is not "
                          "installed, so the built-in stages cannot be loaded",
                          hint="install specframe as a package: `make setup` or `pip install -e .` in the "
                               "repository (a bare copy of the sources has no entry points)")
    return found[0]


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its name, the distribution that ships it, and the hooks it implements."""

    name: str
    distribution: str
    version: str
    hooks: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "hooks": list(self.hooks)}


@dataclass(frozen=True)
class UnloadedPlugin:
    """An installed entry point that supplies nothing: skipped by the switches, or broken while loading."""

    name: str
    distribution: str
    version: str
    status: Literal["skipped", "broken"]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "status": self.status, "reason": self.reason}


def _failure(exc: BaseException) -> str:
    """An exception raised by plugin code, in one line (``sys.exit`` named as such)."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def _env_list(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {item.strip() for item in value.split(",") if item.strip()}


def _dist_of(ep: md.EntryPoint) -> tuple[str, str]:
    """(distribution name, version) of an entry point ("?" when unknown)."""
    if ep.dist is None:
        return "?", ""
    return ep.dist.metadata["Name"], ep.dist.version


class PluginHost:
    """Loads plugins and exposes one typed method per hook.

    Args:
        autoload: load entry points; default is the opposite of ``SPECFRAME_DISABLE_PLUGIN_AUTOLOAD``.
        allowlist: only these entry-point/distribution names (default ``SPECFRAME_LOAD_PLUGINS``).
        disabled: never these names (default ``SPECFRAME_DISABLED_PLUGINS``).
        trace: print hook calls (default ``SPECFRAME_TRACE_PLUGINS``).
        skip_broken: report a plugin that fails to import or whose registration hook raises as a warning
            (listed in :attr:`unloaded`) instead of an error.
        environ: environment to read the switches from (default ``os.environ``).
    """

    def __init__(
        self,
        *,
        autoload: bool | None = None,
        allowlist: Iterable[str] | None = None,
        disabled: Iterable[str] | None = None,
        trace: bool | None = None,
        skip_broken: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        if autoload is None:
            autoload = env.get("SPECFRAME_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0")
        self.autoload = autoload
        self.allowlist = set(allowlist) if allowlist is not None else _env_list(env.get("SPECFRAME_LOAD_PLUGINS"))
        if disabled is None:
            disabled = _env_list(env.get("SPECFRAME_DISABLED_PLUGINS")) or set()
        self.disabled = set(disabled)
        self.skip_broken = skip_broken
        self.unloaded: list[UnloadedPlugin] = []  # entry points skipped by the switches, or broken
        self.pm = pluggy.PluginManager("specframe")
        self.pm.add_hookspecs(hookspecs)
        self._dists: dict[str, tuple[str, str]] = {}  # plugin name -> (distribution, version)
        self._loaded = False
        self._registry: ComponentRegistry | None = None
        if trace if trace is not None else env.get("SPECFRAME_TRACE_PLUGINS", "") not in ("", "0"):
            self._install_trace()
        if {BUILTIN_PLUGIN, CORE_DISTRIBUTION} & self.disabled:
            print(f"warning: SPECFRAME_DISABLED_PLUGINS names specframe's built-in stages ('{BUILTIN_PLUGIN}'), "
                  "which every host loads (the AR baseline and the default stages are built from them)",
                  file=sys.stderr)
        self._load_entry_point(builtin_entry_point(), core=True)

    @property
    def broken(self) -> list[str]:
        """Messages of the plugins that failed to load (with ``skip_broken``)."""
        return [f"plugin '{u.name}' from distribution {u.distribution} {u.version}: {u.reason}"
                for u in self.unloaded if u.status == "broken"]

    # ------------------------------------------------------------------------------------- loading
    def register(self, plugin: object, name: str | None = None, *, distribution: str = "<in-process>",
                 version: str = "") -> str:
        """Register a plugin object or module in-process (tests, notebooks, project-local plugins)."""
        if self._registry is not None:
            self._registry = None  # rebuilt on next use
        registered = self.pm.register(plugin, name=name)
        if registered is None:
            raise PluginError(f"plugin '{name}' is blocked or already registered")
        self._dists[registered] = (distribution, version)
        self._check_pending()
        return registered

    def load(self) -> None:
        """Discover and register entry-point plugins once; later calls do nothing."""
        if self._loaded:
            return
        self._loaded = True
        if self.autoload:
            eps = sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
            self._check_allowlist(eps)
            for ep in eps:
                self._load_entry_point(ep)
        self._check_pending()

    def _check_allowlist(self, eps: list[md.EntryPoint]) -> None:
        """An allowlist entry that names no installed plugin is a typo that would silently load nothing (an
        error); a blocklist entry that names none may be a typo that loads what it meant to block (a warning)."""
        known = {ep.name: _dist_of(ep)[0] for ep in eps}
        stale = sorted(self.disabled - set(known) - set(known.values()))
        if stale:
            print(f"warning: SPECFRAME_DISABLED_PLUGINS names {', '.join(repr(u) for u in stale)}, which matches "
                  f"no installed plugin{did_you_mean(stale[0], [*known, *known.values()])}", file=sys.stderr)
        if not self.allowlist:
            return
        unmatched = sorted(self.allowlist - set(known) - set(known.values()) - {BUILTIN_PLUGIN})  # always there
        if unmatched:
            installed = ", ".join(f"{n} ({d})" for n, d in sorted(known.items())) or "(none)"
            raise PluginError(f"SPECFRAME_LOAD_PLUGINS names {', '.join(repr(u) for u in unmatched)}, which "
                              f"matches no installed plugin{did_you_mean(unmatched[0], [*known, *known.values()])}",
                              hint=f"installed plugins (entry point and distribution): {installed}")

    def _check_pending(self) -> None:
        """Fail loudly on a hook implementation whose name matches no hookspec (a misspelt hook)."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            plugin = getattr(exc, "plugin", None)
            name = self.pm.get_name(plugin) if plugin is not None else "?"
            dist = self._dists.get(name or "", ("?", ""))[0]
            if plugin is not None:
                self.pm.unregister(plugin)
            raise PluginError(
                f"plugin '{name}' ({dist}) implements a hook that specframe does not define: {exc}",
                hint="hook names are listed in docs/plugins/hooks.md; all start with specframe_",
            ) from None

    def _load_entry_point(self, ep: md.EntryPoint, *, core: bool = False) -> None:
        """Import and register one entry point; ``core``: specframe's own ``builtin``, loaded whatever the
        switches say, and never skipped when broken."""
        dist, version = _dist_of(ep)
        names = {ep.name, dist}
        if core:
            try:
                module = ep.load()
            except (Exception, SystemExit) as exc:
                raise PluginError(f"specframe's built-in stages failed to import: {_failure(exc)}",
                                  hint="reinstall specframe (`make setup`)") from None
            self.pm.register(module, name=ep.name)
            self._dists[ep.name] = (dist, version)
            return
        if ep.name == BUILTIN_PLUGIN:
            if dist == CORE_DISTRIBUTION:
                return  # the core's own: loaded by __init__
            self._broken(ep.name, dist, version, f"uses the entry-point name '{BUILTIN_PLUGIN}', which is "
                                                 "specframe's own")
            return
        if self.allowlist is not None and not names & self.allowlist:
            self.unloaded.append(UnloadedPlugin(ep.name, dist, version, "skipped", "not in SPECFRAME_LOAD_PLUGINS"))
            return
        if names & self.disabled:
            self.unloaded.append(UnloadedPlugin(ep.name, dist, version, "skipped", "in SPECFRAME_DISABLED_PLUGINS"))
            return
        if self.pm.get_plugin(ep.name) is not None:
            return
        try:
            module = ep.load()
        except (Exception, SystemExit) as exc:  # plugin code may even call sys.exit while importing
            self._broken(ep.name, dist, version, f"failed to import: {_failure(exc)}")
            return
        try:
            self.pm.register(module, name=ep.name)
        except ValueError as exc:  # the same module behind two entry points, or a name pluggy refuses
            self._broken(ep.name, dist, version, f"cannot be registered: {_failure(exc)}")
            return
        self._dists[ep.name] = (dist, version)

    def _broken(self, name: str, dist: str, version: str, reason: str) -> None:
        """Record a broken plugin (``skip_broken``: warn and go on) or raise naming it."""
        message = f"plugin '{name}' from distribution {dist} {version} {reason}"
        if not self.skip_broken:
            raise PluginError(message, hint=f"fix or uninstall {dist}, or set SPECFRAME_DISABLED_PLUGINS={name} "
                                            "to skip it")
        self.unloaded.append(UnloadedPlugin(name, dist, version, "broken", reason))
        print(f"warning: {message}", file=sys.stderr)

    def _install_trace(self) -> None:
        def before(hook_name: str, impls: list[Any], kwargs: dict[str, Any]) -> None:
            names = ", ".join(i.plugin_name for i in impls)
            print(f"[specframe trace] {hook_name}({', '.join(kwargs)}) -> [{names}]", file=sys.stderr)

        def after(outcome: Any, hook_name: str, impls: list[Any], kwargs: dict[str, Any]) -> None:
            try:
                result = outcome.get_result()
            except BaseException as exc:
                result = f"raised {type(exc).__name__}: {exc}"
            print(f"[specframe trace] {hook_name} returned {result!r}", file=sys.stderr)

        self.pm.add_hookcall_monitoring(before, after)

    # ---------------------------------------------------------------------------------- typed hooks
    @property
    def registry(self) -> ComponentRegistry:
        """The component registry, built from every loaded plugin's registration hooks."""
        if self._registry is None:
            self.load()
            registry = ComponentRegistry()
            registry.unavailable = self._unavailable_note()
            for kind, hook_name in REGISTRATION_HOOKS.items():
                for plugin_name, specs in self._call_each(hook_name):
                    dist, version = self._dists.get(plugin_name, ("<in-process>", ""))
                    for spec in specs or ():
                        if not isinstance(spec, ComponentSpec):
                            raise PluginError(f"plugin '{plugin_name}' ({dist}): {hook_name} yielded "
                                              f"{type(spec).__name__}, expected ComponentSpec")
                        if spec.kind != kind:
                            raise PluginError(f"plugin '{plugin_name}' ({dist}): {hook_name} yielded a "
                                              f"'{spec.kind}' component '{spec.name}'",
                                              hint=f"yield it from {REGISTRATION_HOOKS[spec.kind]} instead")
                        registry.add(spec, plugin=plugin_name, distribution=dist, version=version)
            registry.unavailable = self._unavailable_note()  # a hook may have broken since
            self._registry = registry
        return self._registry

    def _unavailable_note(self) -> str:
        """For 'unknown component' errors: the installed plugins that were skipped or broken, and why."""
        by_reason: dict[str, list[str]] = {}
        for u in self.unloaded:
            reason = u.reason if u.status == "skipped" else f"broken ({u.reason})"
            by_reason.setdefault(reason, []).append(f"{u.name} ({u.distribution})")
        if not by_reason:
            return ""
        parts = [f"{reason}: {', '.join(names)}" for reason, names in by_reason.items()]
        return ("it may come from an installed plugin that was not loaded: " + "; ".join(parts)
                + " (allow it in SPECFRAME_LOAD_PLUGINS / remove it from SPECFRAME_DISABLED_PLUGINS, or fix it)")

    def _call_each(self, hook_name: str, *, strict: bool = False, lists: bool = True,
                   **kwargs: Any) -> list[tuple[str, Any]]:
        """Call a hook once per implementing plugin, keeping who returned what (``lists``: each result as a list).

        A hook that raises (or returns something that is not iterable) is named with its distribution. With
        ``skip_broken`` (and not ``strict``) that plugin's contribution is left out and it is listed as broken.
        """
        hook = getattr(self.pm.hook, hook_name)
        impls = hook.get_hookimpls()
        out = []
        for impl in impls:
            others = [i.plugin for i in impls if i is not impl]
            caller = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            try:
                results = [(impl.plugin_name, list(result or ()) if lists else result) for result in caller(**kwargs)]
            except (Exception, SystemExit) as exc:
                dist, version = self._dists.get(impl.plugin_name, ("<in-process>", ""))
                reason = f"raised in its {hook_name} hook: {_failure(exc)}"
                if strict:
                    raise PluginError(f"plugin '{impl.plugin_name}' from distribution {dist} {version} {reason}",
                                      hint=f"fix or uninstall {dist}, or set "
                                           f"SPECFRAME_DISABLED_PLUGINS={impl.plugin_name} to skip it") from None
                self._broken(impl.plugin_name, dist, version, reason)
                continue
            out += results
        return out

    def validate_pipeline(self, config: Any) -> list[str]:
        """Cross-stage problems reported by every plugin's ``specframe_validate_pipeline``."""
        self.load()
        problems: list[str] = []
        for _, result in self._call_each("specframe_validate_pipeline", strict=True, config=config,
                                         registry=self.registry):
            problems.extend(str(p) for p in result)
        return problems

    def register_commands(self, cli: Any) -> None:
        self.load()
        self._call_each("specframe_register_commands", lists=False, cli=cli)

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin with its distribution, version and implemented hooks."""
        self.load()
        infos = []
        for name, plugin in sorted(self.pm.list_name_plugin(), key=lambda x: x[0]):
            hooks = tuple(sorted(h.name for h in self.pm.get_hookcallers(plugin) or ()))
            dist, version = self._dists.get(name, ("<in-process>", ""))
            infos.append(PluginInfo(name=name, distribution=dist, version=version, hooks=hooks))
        return infos
