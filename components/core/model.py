"""The pydantic base and constrained types shared by the stack file's models and the components' args
(one definition of each pattern and limit, so both paths say the same thing)."""

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Patterns for strings that reach GCP, a Monitoring filter or PromQL: validated, never escaped later.
GCE_NAME = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
_PROJECT = r"[a-z][-a-z0-9]{4,28}[a-z0-9]"
NETWORK_REF = rf"^(projects/{_PROJECT}/global/networks/)?[a-z]([-a-z0-9]{{0,61}}[a-z0-9])?$"
SUBNETWORK_REF = (
    rf"^(projects/{_PROJECT}/regions/[a-z]+-[a-z]+[0-9]+/subnetworks/)?[a-z]([-a-z0-9]{{0,61}}[a-z0-9])?$"
)
MACHINE_TYPE = r"^[a-z][a-z0-9]*(-[a-z0-9]+){1,4}$"
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
CHANNEL = rf"^projects/({_PROJECT}|[0-9]{{1,20}})/notificationChannels/[0-9]{{1,30}}$"
CIDR = r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$"
DURATION = r"^[1-9][0-9]{0,6}[smhd]$"
# A Compute Engine image by its full path, as gke-disk-image-builder prints it and GKE's node pool API
# takes it ("fully-qualified resource ID"); images are global. Image names follow GCE_NAME.
DISK_IMAGE = rf"^projects/{_PROJECT}/global/images/[a-z]([-a-z0-9]{{0,61}}[a-z0-9])?$"
# GKE versions (core/gke_version.py), RFC3339 times in UTC or with an offset, and a time of day.
GKE_VERSION = r"^1\.(0|[1-9][0-9]?)(\.(0|[1-9][0-9]?)(-gke\.(0|[1-9][0-9]{0,9}))?)?$"
RFC3339 = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$"
TIME_OF_DAY = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
# A Cloud KMS key: key ring and key IDs match [a-zA-Z0-9_-]{1,63} (the Cloud KMS v1 API's
# CreateKeyRingRequest.key_ring_id and CreateCryptoKeyRequest.crypto_key_id). ASCII classes, not
# `\w`: pydantic's Rust regex reads `\w` as every Unicode word character, which admits IDs KMS refuses
# and, repeated 63 times, takes ~40 ms to compile on every render.
_KMS_ID = r"[A-Za-z0-9_-]{1,63}"
KMS_KEY = rf"^projects/{_PROJECT}/locations/[a-z0-9-]{{1,40}}/keyRings/{_KMS_ID}/cryptoKeys/{_KMS_ID}$"
# A Google account's or group's email (Google Groups for RBAC; batch.teams[].members): a local part and a
# domain of DNS labels. Not every address this admits exists; Google's own rules are not written here.
_DOMAIN = r"([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}"
EMAIL = rf"[A-Za-z0-9._%+'-]{{1,64}}@{_DOMAIN}"
RBAC_SECURITY_GROUP = rf"^gke-security-groups@{_DOMAIN}$"
TEAM_MEMBER = rf"^(group|user):{EMAIL}$"
# What each pattern means, for the error message.
PATTERN_MEANINGS = {
    RBAC_SECURITY_GROUP: "gke-security-groups@<your domain>, the group GKE requires by that name",
    TEAM_MEMBER: "group:<email> or user:<email>, e.g. group:ml-research@example.com",
    KMS_KEY: "a Cloud KMS key: projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>",
    GCE_NAME: "a GCE name: 1-63 lowercase letters, digits and hyphens, starting with a letter",
    NETWORK_REF: "a VPC name, or projects/<project>/global/networks/<name> (Shared VPC)",
    SUBNETWORK_REF: "a subnet name, or projects/<project>/regions/<region>/subnetworks/<name> (Shared VPC)",
    MACHINE_TYPE: "a GCE machine type such as e2-standard-4 or n1-highmem-8",
    PRINTABLE: "printable text without control characters",
    DNS_LABEL: "a Kubernetes namespace name: lowercase letters, digits and hyphens",
    CHANNEL: "projects/<project>/notificationChannels/<numeric id>",
    CIDR: "an IPv4 CIDR block such as 10.0.0.0/16",
    DURATION: "a duration such as 90m, 24h or 7d (a whole number and s, m, h or d)",
    DISK_IMAGE: "a Compute Engine image: projects/<project>/global/images/<image name>",
    GKE_VERSION: "a GKE version: 1.<minor>, 1.<minor>.<patch> or 1.<minor>.<patch>-gke.<build>",
    RFC3339: "an RFC 3339 time such as 2027-01-31T00:00:00Z",
    TIME_OF_DAY: "a time of day in UTC, HH:MM (e.g. 09:00)",
}
GceName = Annotated[str, Field(max_length=63, pattern=GCE_NAME)]
MachineTypeName = Annotated[str, Field(max_length=63, pattern=MACHINE_TYPE)]
Cidr = Annotated[str, Field(max_length=18, pattern=CIDR)]
LabelKey = Annotated[str, Field(max_length=317)]
LabelValue = Annotated[str, Field(max_length=63)]


def example(**values: Any) -> ConfigDict:
    """A model's config holding one valid value, keyed as the stack file writes it: the example an
    error message shows when a mapping is given the wrong type (core/shapes.py; tests/test_shapes.py
    validates each against its model)."""
    return ConfigDict(json_schema_extra={"examples": [values]})


class StackModel(BaseModel):
    """A stack file model. A field whose default is a model instance takes it from
    `Model.model_construct()`: the model's own defaults, as `Model()` gives them (pydantic validates no
    default, and these models have no model validators; tests/test_model_defaults.py checks both), but
    without building that model's validator at import, which `Model()` does (~6 ms for BatchConfig)
    and which a stack file without the section never needs."""

    model_config = ConfigDict(
        # Each model builds its validator on first use, not at import: a render uses some of them.
        defer_build=True,
        alias_generator=to_camel,
        populate_by_name=False,
        extra="forbid",
        frozen=True,
        str_strip_whitespace=True,
        # No coercion: `gpusPerNode: true` or `maxNodes: "2"` is a mistake to report, not to guess.
        strict=True,
    )
