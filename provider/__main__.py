"""Entry point of the gke-gpu multi-language plugin: serves the public components over gRPC.

The Pulumi CLI runs ``python provider/ <engine address>``; the host prints its port on stdout, so
nothing may print at import time. The component list is gke_gpu.PUBLIC_COMPONENTS (the
one list the package exports, tools/schema.py and the tests share); the version is the installed
distribution's, i.e. pyproject.toml's at the tag the plugin was fetched at.
"""

import sys
from importlib.metadata import version

from pulumi.provider.server import main

from gke_gpu import public_components
from gke_gpu.core.package import PACKAGE
from gke_gpu.core.provider import GkeGpuComponentProvider

if __name__ == "__main__":
    # What pulumi.provider.experimental.component_provider_host does, with our provider: it keeps a
    # component's InvalidArgsError structured (gke_gpu/core/provider.py). argv: the plugin's directory,
    # then the engine's address and flags.
    main(GkeGpuComponentProvider(public_components(), PACKAGE, version=version("gke-gpu")), sys.argv[1:])
