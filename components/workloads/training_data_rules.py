"""The rules of a team's training data (the stack file's `batch.teams[].data`, TrainingData's
`volumes`, both `workloads.model.TeamVolumeConfig`), which the stack file and the component share, and
the mount options each bucket profile gets.

Sources (docs/teams.md, "Training data"): the PersistentVolume and claim shapes and the mount options
follow GoogleCloudPlatform/gcsfuse samples/gke-csi-yaml/gpu/training-pv.yaml (@24c83ce8) and
checkpointing-pv.yaml (@15b0e006), which cluster-toolkit's examples/gke-a3-ultragpu cites; the Lustre
volume handle is `<project>/<location>/<instance>` (GoogleCloudPlatform/lustre-csi-driver
pkg/csi_driver/volume.go @7987731e), its attributes `ip` and `filesystem` (GKE's Managed Lustre CSI
driver reference).
"""

from __future__ import annotations

from ..cluster.model import LUSTRE_CSI_MIN_VERSION
from ..core.common import KeyNames, Problems, cut
from ..core.gke_version import below
from ..serving.bucket_name import bucket_name_problem
from .model import BucketProfile, TeamVolumeConfig

# gcsfuse samples/gke-csi-yaml/gpu/training-pv.yaml (@24c83ce8), its commented-out file cache left off.
TRAINING_MOUNT_OPTIONS = (
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:-1",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
)
# gcsfuse samples/gke-csi-yaml/gpu/checkpointing-pv.yaml (@15b0e006). HAZARD: the file cache is
# unlimited and lives in the gcsfuse sidecar's cache volume (the node's ephemeral storage unless the
# Pod gives it another): docs/teams.md says how to bound it.
CHECKPOINT_MOUNT_OPTIONS = (
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:-1",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "file-cache:max-size-mb:-1",
    "file-cache:cache-file-for-range-read:true",
    "file-cache:enable-parallel-downloads:true",
    "read_ahead_kb=1024",
    "write:enable-streaming-writes:true",
)
MOUNT_OPTIONS = {
    BucketProfile.TRAINING.value: TRAINING_MOUNT_OPTIONS,
    BucketProfile.CHECKPOINTS.value: CHECKPOINT_MOUNT_OPTIONS,
}


def check_volumes(
    volumes: tuple[TeamVolumeConfig, ...] | list[TeamVolumeConfig],
    names: KeyNames,
    problems: Problems,
    *,
    key: str,
    minimum_version: str | None,
    version_key: str,
) -> None:
    """Each volume names one source, once per team; a bucket name Cloud Storage accepts; Lustre only on a
    GKE version with its CSI driver (`minimum_version` unset: the channel's default, which has it)."""
    seen: set[str] = set()
    for i, volume in enumerate(volumes):
        at = f"{key}[{i}]"
        if volume.name in seen:
            problems.add(f"{at}.name", f"{cut(volume.name)} is listed twice; each volume is one claim")
        seen.add(volume.name)
        sources = [s for s in ("gcs", "lustre") if getattr(volume, s) is not None]
        if len(sources) != 1:
            problems.add(
                at,
                f"needs exactly one of {names.key('gcs')} (a bucket) and {names.key('lustre')} (a Managed "
                f"Lustre instance); it has {len(sources) or 'none'}",
            )
            continue
        if volume.gcs is not None:
            why = bucket_name_problem(volume.gcs.bucket)
            if why:
                problems.add(f"{at}.gcs.bucket", f"{cut(volume.gcs.bucket)} {why}")
        elif minimum_version and below(minimum_version, LUSTRE_CSI_MIN_VERSION):
            problems.add(
                f"{at}.lustre",
                f"needs {version_key} {LUSTRE_CSI_MIN_VERSION} or later (GKE's Managed Lustre CSI driver); "
                f"it is {minimum_version}",
            )
