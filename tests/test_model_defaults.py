"""Stack-file model fields whose default is a model instance (core/model.py, StackModel): each default,
built with `model_construct()`, equals the validated `Model()`, and no stack model has a model
validator that `model_construct()` would skip."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from pydantic import BaseModel

import gke_gpu
from gke_gpu.core.model import StackModel


def _stack_models() -> list[type[StackModel]]:
    for module in pkgutil.walk_packages(gke_gpu.__path__, "gke_gpu."):
        if module.name.rsplit(".", 1)[-1] in ("model", "pool", "stack_model", "image_digests"):
            importlib.import_module(module.name)
    seen: list[type[StackModel]] = []
    todo: list[type[StackModel]] = [StackModel]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


MODELS = _stack_models()
DEFAULTS = [
    (model, name, info.default)
    for model in MODELS
    for name, info in model.model_fields.items()
    if isinstance(info.default, BaseModel)
]


def test_the_sections_with_model_defaults_are_found() -> None:
    fields = {f"{model.__name__}.{name}" for model, name, _ in DEFAULTS}
    assert {"StackConfig.batch", "StackConfig.monitoring", "StackConfig.images"} <= fields


@pytest.mark.parametrize(("model", "name", "default"), DEFAULTS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_model_default_equals_the_validated_model(model: type, name: str, default: BaseModel) -> None:
    validated = type(default)()
    assert default == validated
    assert default.model_dump() == validated.model_dump()
    assert default.model_fields_set == validated.model_fields_set


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_no_stack_model_has_a_model_validator(model: type[StackModel]) -> None:
    assert not model.__pydantic_decorators__.model_validators, (
        f"{model.__name__} has a model validator: a default built with model_construct() skips it"
    )
