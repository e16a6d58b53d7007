"""Entry point of the gke-gpu multi-language plugin: serves the public components over gRPC.

The Pulumi CLI runs ``python provider/ <engine address>``; the host prints its port on stdout, so
nothing may print at import time. The component list is gke_gpu.core.package.PUBLIC_COMPONENTS (the
one list the package exports, tools/schema.py and the tests share); the version is the installed
distribution's, i.e. pyproject.toml's at the tag the plugin was fetched at.
"""

from importlib.metadata import version

from pulumi.provider.experimental import component_provider_host

from gke_gpu.core.package import PACKAGE, public_components

if __name__ == "__main__":
    component_provider_host(public_components(), PACKAGE, version=version("gke-gpu"))
