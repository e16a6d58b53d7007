"""The multi-language plugin's provider: the SDK's ComponentProvider, with component arg errors kept
structured.

The SDK wraps every exception a component's constructor raises in ``ComponentInitError``, so the
gRPC server's ``Construct`` never sees an ``InputPropertiesError`` from inside a component and the
engine gets ``UNKNOWN`` with a traceback instead of ``INVALID_ARGUMENT`` with one property error per
problem (pulumi 3.272.0, ``provider/experimental/component.py``). And the server re-raises any
``RunError`` as it is, before it looks for property errors (``provider/server.py`` ``Construct``),
which InvalidArgsError also is. So this provider turns a component's InvalidArgsError into a plain
``InputPropertiesError`` with the same message and property errors: the engine gets
``INVALID_ARGUMENT`` with them, in every language (tests/test_provider_construct.py drives the
server's ``Construct`` to check it).
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
            inner = error.inner
            if isinstance(inner, pulumi.InputPropertiesError):
                # A plain InputPropertiesError: the server re-raises a RunError (which InvalidArgsError
                # also is) before it looks for property errors, so the engine would get UNKNOWN.
                raise pulumi.InputPropertiesError(inner.message, inner.errors) from None
            raise
