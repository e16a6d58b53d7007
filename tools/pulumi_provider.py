"""The Pulumi SDK's component-provider classes, importable in a process that also uses Google's protos.

The SDK (3.272.0) ships its own copy of `google.rpc.Status` as `pulumi/runtime/proto/status_pb2.py`,
registered under the file name `google/protobuf/status.proto`; googleapis-common-protos registers the
same message as `google/rpc/status.proto`. The default descriptor pool refuses the second one
("duplicate symbol 'google.rpc.Status'"), so importing `pulumi.provider.server` (which the component
provider needs) and anything that imports `google.rpc.status_pb2` (google-api-core with gRPC, as the
dashboard tests do) in one process fails, in either order. Both define the same message (same full
name, same fields), so one module serves both names: whichever is imported first.
"""

import importlib
import sys

import pulumi.runtime.proto as _pulumi_proto

_PULUMI, _GOOGLE = "pulumi.runtime.proto.status_pb2", "google.rpc.status_pb2"

if _PULUMI in sys.modules:
    sys.modules.setdefault(_GOOGLE, sys.modules[_PULUMI])
else:
    sys.modules[_PULUMI] = importlib.import_module(_GOOGLE)
    _pulumi_proto.status_pb2 = sys.modules[_PULUMI]

from pulumi.provider.experimental.component import ComponentProvider  # noqa: E402
from pulumi.provider.server import ComponentInitError  # noqa: E402

__all__ = ["ComponentInitError", "ComponentProvider"]
