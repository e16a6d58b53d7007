"""The multi-language plugin's provider: the SDK's ComponentProvider, with component arg errors kept
structured.

The SDK wraps every exception a component's constructor raises in ``ComponentInitError``, so the
gRPC server's ``Construct`` never sees an ``InputPropertiesError`` from inside a component and the
engine gets ``UNKNOWN`` with a traceback instead of ``INVALID_ARGUMENT`` with one property error per
problem (pulumi 3.272.0, ``provider/experimental/component.py``). This provider unwraps that one case,
so InvalidArgsError reaches the engine as the SDK's own structured error, in every language.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.provider import ConstructResult
from pulumi.provider.server import ComponentInitError


class GkeGpuComponentProvider(ComponentProvider):
    def construct(
        self,
        name: str,
        resource_type: str,
        inputs: Any,
        options: pulumi.ResourceOptions | None = None,
    ) -> ConstructResult:
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as error:
            if isinstance(error.inner, pulumi.InputPropertiesError):
                raise error.inner from None
            raise
