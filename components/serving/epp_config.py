"""The endpoint picker's plugin configuration for a disaggregated service: llm-d-router v0.10.0's
EndpointPickerConfig (`llm-d.ai/v1alpha1`, a file the picker reads, not a Kubernetes object; its Go
types are apix/config/v1alpha1/endpointpickerconfig_types.go, no JSON schema is published: the tests
hold this to one written from them, tests/schemas/endpointpickerconfig.llm-d.ai_v1alpha1.json).

Every request runs the decode profile; the always-disaggregate decider then runs the prefill profile,
and the profile handler writes the chosen prefill Pod into `x-prefiller-host-port` for decode's
routing sidecar. This is the plugin set of llm-d v0.9.0's wide-EP guide
(guides/wide-ep-lws/router/wide-ep-lws.values.yaml), which needs no hardware-calibrated figure (its
P/D guide's prefix-cache-affinity-filter takes a `peakPrefillThroughput` measured for gpt-oss-120b on
H200), written in the handler's current form:
- `disagg-profile-handler` with the nested `deciders.prefill`, not the deprecated flat
  `deciderPluginName` ("Deprecated: using flat parameter format", disagg_profile_handler.go);
- no `disagg-headers-handler` ("Deprecated ... disagg-profile-handler now implements PreRequest
  natively", planned removal v0.11: disagg/README.md; the handler sets the header itself,
  disagg_profile_handler.go at v0.10.0);
- `max-score-picker` named in both profiles, as the P/D guide does.
Each type is one llm-d-router v0.10.0 registers (cmd/epp/runner/runner.go), checked by the tests."""

from __future__ import annotations

from typing import Any

import yaml

API_VERSION = "llm-d.ai/v1alpha1"
KIND = "EndpointPickerConfig"
# The chart's name for it (router.epp.pluginsConfigFile) and its key in pluginsCustomConfig.
CONFIG_FILE = "pd-config.yaml"
DECIDER = "always-disagg-pd-decider"
PROFILE_HANDLER = "disagg-profile-handler"
PICKER = "max-score-picker"
PREFILL_PROFILE, DECODE_PROFILE = "prefill", "decode"


def pd_config() -> dict[str, Any]:
    """The configuration: prefill picked among prefill Pods by prefix cache, queue and active requests,
    decode among decode Pods by active requests."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "plugins": [
            {"type": DECIDER},
            {"type": PROFILE_HANDLER, "parameters": {"deciders": {"prefill": DECIDER}}},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {"type": "prefix-cache-scorer"},
            {"type": "queue-scorer"},
            {"type": "active-request-scorer"},
            {"type": PICKER},
        ],
        "schedulingProfiles": [
            {
                "name": PREFILL_PROFILE,
                "plugins": [
                    {"pluginRef": "prefill-filter"},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "active-request-scorer", "weight": 2},
                    {"pluginRef": PICKER},
                ],
            },
            {
                "name": DECODE_PROFILE,
                "plugins": [
                    {"pluginRef": "decode-filter"},
                    {"pluginRef": "active-request-scorer"},
                    {"pluginRef": PICKER},
                ],
            },
        ],
    }


def pd_epp_values() -> dict[str, Any]:
    """The chart's `router.epp` values that hand the picker this configuration (routerlib values.yaml:
    `pluginsConfigFile` names a key of the ConfigMap, `pluginsCustomConfig` adds it)."""
    return {
        "pluginsConfigFile": CONFIG_FILE,
        "pluginsCustomConfig": {CONFIG_FILE: yaml.safe_dump(pd_config(), sort_keys=False)},
    }
