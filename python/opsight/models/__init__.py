"""The model tools' common ground: loading a model or a ``module:factory``, one query's
inputs, the back-ends' names, comparing outputs, and the errors they raise.

``opsight bench`` (:mod:`opsight.bench`), ``opsight compare-backends``
(:mod:`opsight.compare_backends`), ``opsight explain`` (:mod:`opsight.explain`) and
``opsight model`` (:mod:`opsight.model_view`) build on this package; it imports none of them,
nor anything of opsight's (and torch, ONNX Runtime or numpy only when a function needs them).

Modules: ``loading`` (MODEL files and factories: :func:`load`, :func:`load_factory`,
:func:`call_factory`, :class:`Model`), ``inputs`` (:func:`split_inputs`,
:func:`tile_inputs`, :func:`samples_per_query`), ``backends`` (:data:`BACKENDS`,
:data:`BACKEND_ALIASES`, :func:`canonical_backend`), ``outputs`` (:func:`compare_outputs`,
:func:`leaves`),
``errors`` (:class:`ModelError`, :class:`FactoryError`, :func:`error_text`).
"""

from __future__ import annotations

from .backends import BACKEND_ALIASES, BACKENDS, ORT_PROVIDERS, canonical_backend
from .errors import FactoryError, ModelError, error_text, first_line
from .inputs import samples_per_query, split_inputs, tile_inputs
from .loading import (LoadedModel, Model, call_factory, from_object, load, load_factory,
                      model_form, parse_shapes)
from .outputs import compare_outputs, leaves

__all__ = ["BACKENDS", "BACKEND_ALIASES", "ORT_PROVIDERS", "FactoryError", "LoadedModel",
           "Model", "ModelError", "call_factory", "canonical_backend", "compare_outputs",
           "error_text", "first_line", "from_object", "leaves", "load", "load_factory", "model_form",
           "parse_shapes", "samples_per_query", "split_inputs", "tile_inputs"]
