"""Installing a targets file's wrappers into a running program, and taking them out again.

An :class:`Instrumenter` holds the targets of a targets file (``opsight.targets``). For
each target module it wraps the named functions and methods as soon as the module exists:
at once if it is already imported, otherwise right after its code runs (an import hook on
``sys.meta_path`` that hands the module over after ``exec_module``). A program's main script
is not imported; :mod:`opsight._capture.script` runs it with the same wrapping applied after each
top-level definition.

Each wrap is a :class:`Patch`: the owner (module or class), the attribute, the original
value exactly as found in the owner's ``__dict__`` and the wrapper put there. ``disable()``
puts every original back (a switched-off target then costs nothing: the program calls its
own function), ``enable()`` puts the wrappers back. Nothing else in the program is touched.

Resolution follows the targets' names: ``class`` is a dotted path of nested classes, and
``class`` and ``function`` may be glob patterns (a pattern matches the classes defined in
the module itself and the functions defined in the class itself). A target that never
matches anything is reported with the file, line and entry that named it.

An entry may be taken by someone else before it is wrapped as a function: the claimer set
with :func:`set_target_claimer` (the session's integrations: ONNX Runtime instruments its
``InferenceSession.run`` itself). The targets are any objects with ``opsight.targets.Target``'s
attributes; this module imports neither the targets files' parser nor the session.

Thread-safety: install, enable and disable run under the GIL; the import hook may run on
any thread that imports.
"""

from __future__ import annotations

import fnmatch
import inspect
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import opsight._native as _native
from .import_hook import ImportHook
from .wrapping import is_traced, wrap

MAIN_MODULE = "__main__"
_MISSING = object()

#: A targets entry: ``opsight.targets.Target`` (module, class_name, function, source...).
Target = Any

#: The targets installed into this process for its whole life (``OPSIGHT_OUTPUT`` start-up,
#: ``opsight run -c``), or None: what ``opsight.enable()``/``disable()`` switch and what the
#: main script's definitions are wrapped by. Written only under the GIL, by the start-up.
installed: Instrumenter | None = None

#: ``claimer(module, target) -> bool``: whether an entry was taken before being wrapped.
_claimer: Callable[[types.ModuleType, Any], bool] | None = None


def set_target_claimer(claimer: Callable[[types.ModuleType, Any], bool] | None) -> None:
    """Every Instrumenter asks ``claimer(module, target)`` first, for each targets entry of
    a module; an entry it takes (True) is counted as matched and not wrapped here. Set by
    ``opsight._session.integrations`` (its ``wrap_target``) when it is imported."""
    global _claimer
    _claimer = claimer


@dataclass
class Patch:
    owner: Any
    attribute: str
    original: Any
    replacement: Any
    owner_had_attribute: bool


@dataclass
class _TargetState:
    target: Target
    matches: int = 0
    problems: list[str] = field(default_factory=list)


def _is_pattern(text: str) -> bool:
    return any(character in text for character in "*?[")


class Instrumenter:
    """The targets of one targets file, installed into this process; see the module's
    documentation."""

    def __init__(self, targets: Iterable[Target], main_aliases: Iterable[str] = ()) -> None:
        self._states = [_TargetState(target) for target in targets]
        self._by_module: dict[str, list[_TargetState]] = {}
        for state in self._states:
            self._by_module.setdefault(state.target.module, []).append(state)
        self._main_aliases = set(main_aliases)
        self._patches: list[Patch] = []
        self._applied_modules: set[str] = set()
        self._enabled = True
        self._hook: ImportHook | None = None
        self._lock = threading.RLock()

    # ---- installing -----------------------------------------------------------------------
    def install(self) -> None:
        """Wraps the targets of modules already imported and hooks the imports of the rest."""
        with self._lock:
            if self._hook is None:
                self._hook = ImportHook(self.wants_module, self.apply_to_module)
                sys.meta_path.insert(0, self._hook)
            for module_name in list(self._by_module):
                module = sys.modules.get(module_name)
                if module is not None and module_name != MAIN_MODULE:
                    self.apply_to_module(module)

    def uninstall(self) -> None:
        """Removes the import hook and puts every original back."""
        with self._lock:
            if self._hook is not None and self._hook in sys.meta_path:
                sys.meta_path.remove(self._hook)
            self._hook = None
            self.disable()

    def add_main_alias(self, module_name: str) -> None:
        """Targets naming ``module_name`` apply to ``__main__`` too (``python -m module``)."""
        with self._lock:
            self._main_aliases.add(module_name)

    def wants_module(self, module_name: str) -> bool:
        # Also once applied: a reload or a re-import runs the module's code again, and its
        # new functions are wrapped again (already wrapped ones are skipped).
        return module_name in self._by_module

    def states_for(self, module_name: str) -> list[_TargetState]:
        states = list(self._by_module.get(module_name, ()))
        if module_name == MAIN_MODULE:
            for alias in self._main_aliases:
                states += self._by_module.get(alias, ())
        return states

    def apply_to_module(self, module: types.ModuleType, module_name: str | None = None) -> None:
        """Wraps every target of ``module`` (named ``module_name``, by default its own name)."""
        name = module_name or module.__name__
        with self._lock:
            self._applied_modules.add(name)
            for state in self.states_for(name):
                self._apply_target(module, state)

    def apply_to_names(self, namespace: dict, names: Iterable[str], module: types.ModuleType) -> None:
        """Wraps the targets of the main script that match ``names``, just defined in it."""
        with self._lock:
            for state in self.states_for(MAIN_MODULE):
                target = state.target
                first = target.class_name.split(".")[0] if target.class_name else target.function
                if any(fnmatch.fnmatchcase(name, first) for name in names):
                    self._apply_target(module, state, only_names=set(names))

    def _apply_target(self, module: types.ModuleType, state: _TargetState,
                      only_names: set[str] | None = None) -> None:
        target = state.target
        if only_names is None and _claimer is not None:
            # An integration may own the entry (ONNX Runtime's InferenceSession.run: its own
            # profile is merged too); set_target_claimer.
            if _claimer(module, target):
                state.matches += 1
                return
        if target.class_name:
            owners = self._resolve_classes(module, target.class_name.split("."), only_names)
            if not owners:
                if only_names is None:
                    state.problems.append(
                        f"class {target.class_name!r} not found in module {module.__name__!r}"
                    )
                return
        else:
            owners = [module]
        for owner in owners:
            self._apply_function(owner, state, module, only_names if owner is module else None)

    def _resolve_classes(self, module: types.ModuleType, parts: list[str],
                         only_names: set[str] | None) -> list[type]:
        current: list[Any] = [module]
        for depth, part in enumerate(parts):
            found: list[Any] = []
            for owner in current:
                names = vars(owner)
                if depth == 0 and only_names is not None:
                    names = {key: value for key, value in names.items() if key in only_names}
                if _is_pattern(part):
                    for key, value in list(names.items()):
                        if (isinstance(value, type) and fnmatch.fnmatchcase(key, part)
                                and (owner is not module or value.__module__ == module.__name__)):
                            found.append(value)
                elif depth > 0 or only_names is None or part in only_names:
                    value = getattr(owner, part, None)
                    if isinstance(value, type):
                        found.append(value)
            current = found
        return current

    def _apply_function(self, owner: Any, state: _TargetState, module: types.ModuleType,
                        only_names: set[str] | None) -> None:
        target = state.target
        owner_dict = vars(owner)
        if _is_pattern(target.function):
            names = [name for name in list(owner_dict)
                     if fnmatch.fnmatchcase(name, target.function)
                     and not (name.startswith("__") and name.endswith("__"))
                     and (only_names is None or name in only_names)]
            names = [name for name in names if self._is_wrappable(owner_dict[name], owner, module)]
        else:
            if only_names is not None and target.function not in only_names:
                return
            names = [target.function]
        for name in names:
            self._patch(owner, name, state)

    @staticmethod
    def _is_wrappable(value: Any, owner: Any, module: types.ModuleType) -> bool:
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, type) or not callable(value):
            return False
        if isinstance(owner, types.ModuleType):  # a pattern matches the module's own functions
            return getattr(value, "__module__", None) in (module.__name__, None)
        return True

    def _patch(self, owner: Any, name: str, state: _TargetState) -> None:
        target = state.target
        try:
            original = inspect.getattr_static(owner, name)
        except AttributeError:
            where = "module" if isinstance(owner, types.ModuleType) else "class"
            state.problems.append(f"{name!r} not found in {where} {owner.__name__!r}")
            return
        if isinstance(original, property):
            state.problems.append(f"{owner.__name__}.{name} is a property, not a function")
            return
        inner = original.__func__ if isinstance(original, (staticmethod, classmethod)) else original
        if is_traced(inner):
            state.matches += 1  # already wrapped (an overlapping pattern)
            return
        if not callable(inner):
            state.problems.append(f"{name!r} in {owner.__name__!r} is not callable")
            return
        if target.tag:
            span_name = target.tag
        elif isinstance(owner, types.ModuleType):
            span_name = getattr(inner, "__qualname__", name) if getattr(inner, "__name__", None) == name else name
        else:
            span_name = f"{owner.__qualname__}.{name}"
        replacement = wrap(original, span_name, metrics=target.metrics)
        owner_had_attribute = name in vars(owner)
        try:
            setattr(owner, name, replacement)
        except (TypeError, AttributeError) as error:
            state.problems.append(f"cannot wrap {owner.__name__}.{name}: {error}")
            return
        state.matches += 1
        self._patches.append(Patch(owner, name, original, replacement, owner_had_attribute))
        if not self._enabled:
            self._restore(self._patches[-1])

    # ---- switching ------------------------------------------------------------------------
    @staticmethod
    def _restore(patch: Patch) -> None:
        if vars(patch.owner).get(patch.attribute) is not patch.replacement:
            return  # someone replaced it since: leave theirs alone
        if patch.owner_had_attribute:
            setattr(patch.owner, patch.attribute, patch.original)
        else:
            delattr(patch.owner, patch.attribute)

    def disable(self) -> None:
        """Puts every original back; new imports are still hooked, but stay unwrapped."""
        with self._lock:
            self._enabled = False
            for patch in reversed(self._patches):
                self._restore(patch)

    def enable(self) -> None:
        """Puts the wrappers back."""
        with self._lock:
            self._enabled = True
            for patch in self._patches:
                current = vars(patch.owner).get(patch.attribute, _MISSING)
                if current is (patch.original if patch.owner_had_attribute else _MISSING):
                    setattr(patch.owner, patch.attribute, patch.replacement)

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def patches(self) -> list[Patch]:
        return list(self._patches)

    # ---- reporting ------------------------------------------------------------------------
    def unresolved(self) -> list[tuple[Target, str]]:
        """Targets that matched nothing, each with the reason."""
        result = []
        for state in self._states:
            if state.matches:
                continue
            target = state.target
            if state.problems:
                reason = "; ".join(dict.fromkeys(state.problems))
            elif target.module not in self._applied_modules and not (
                    target.module in self._main_aliases and MAIN_MODULE in self._applied_modules):
                reason = f"module {target.module!r} was never imported"
            elif _is_pattern(target.function):
                reason = f"no function matches {target.function!r}"
            else:
                reason = f"{target.function!r} not found"
            result.append((target, reason))
        return result
