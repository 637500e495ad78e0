"""A post-import hook: a ``sys.meta_path`` finder that lets the finders after it find the
modules it wants, then hands each such module to a callback right after the module's own
loader has run it. The targets (``instrument``) use it to wrap functions as their modules
are imported; the integrations (``opsight._session.integrations.ImportWatch``) to act on a
library once the program imports it.

Thread-safety: may run on any thread that imports; it never imports anything itself.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import types
from typing import Any, Callable


class _LoaderProxy(importlib.abc.Loader):
    """Runs a module with its own loader, then calls `after_exec(module)`."""

    def __init__(self, loader: Any, after_exec: Callable[[types.ModuleType], None]) -> None:
        self._loader = loader
        self._after_exec = after_exec

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        self._after_exec(module)

    def __getattr__(self, attribute: str) -> Any:  # get_source, is_package, get_resource_reader...
        return getattr(self._loader, attribute)


class ImportHook(importlib.abc.MetaPathFinder):
    """Finds the modules `wants(name)` accepts with the finders after it and hands their
    loading to a :class:`_LoaderProxy` calling `after_exec`."""

    def __init__(self, wants: Callable[[str], bool],
                 after_exec: Callable[[types.ModuleType], None]) -> None:
        self._wants = wants
        self._after_exec = after_exec
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not self._wants(fullname) or getattr(self._busy, "active", False):
            return None
        self._busy.active = True
        try:
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find_spec = getattr(finder, "find_spec", None)
                if find_spec is None:
                    continue
                spec = find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.active = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LoaderProxy(spec.loader, self._after_exec)
        return spec
