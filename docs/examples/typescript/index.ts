// A GPU cluster in TypeScript from the gke-gpu package: a network, a Standard cluster and two GPU
// node pools. Set up (needs the Pulumi CLI; <your-git-host>/gke-gpu is this repository's URL):
//   pulumi new typescript
//   pulumi package add https://<your-git-host>/gke-gpu/provider   # generates the SDK
//   pulumi config set gcp:project <your-gcp-project>
// The SDK's import name below is the CLI's default for a package named gke-gpu (UNVERIFIED here:
// use the import line `pulumi package add` prints). Every property used here is checked against
// provider/schema.json by tests/test_docs_examples.py.
import * as pulumi from "@pulumi/pulumi";
import * as gkegpu from "@pulumi/gke-gpu";

const project = new pulumi.Config("gcp").require("project");
const region = "us-central1";

const net = new gkegpu.GkeNetwork("net", {
    project: project,
    region: region,
    namePrefix: "ml",
    subnetCidr: "10.10.0.0/20",
    podsCidr: "10.16.0.0/14",
    servicesCidr: "10.20.0.0/20",
});

const cluster = new gkegpu.GkeCluster("gke", {
    project: project,
    name: "ml",
    location: region,
    autopilot: false,
    network: net.networkSelfLink,
    subnetwork: net.subnetworkSelfLink,
    podsRangeName: net.podsRangeName,
    servicesRangeName: net.servicesRangeName,
});

// One L4 per node, up to 4 nodes; the machine type (g2-standard-8) and zones are derived. The nodes
// run as the cluster's dedicated service account, not Compute Engine's default one.
const l4 = new gkegpu.GpuNodePool("l4", {
    project: project,
    location: region,
    clusterName: cluster.clusterName,
    nodeServiceAccountEmail: cluster.nodeServiceAccountEmail,
    accelerator: "nvidia-l4",
    gpusPerNode: 1,
    maxNodes: 4,
});

// Eight H100s per node on Spot VMs, up to 2 nodes.
const h100 = new gkegpu.GpuNodePool("h100", {
    project: project,
    location: region,
    clusterName: cluster.clusterName,
    nodeServiceAccountEmail: cluster.nodeServiceAccountEmail,
    accelerator: "nvidia-h100-80gb",
    gpusPerNode: 8,
    maxNodes: 2,
    spot: true,
});

export const kubeconfig = cluster.kubeconfig;
export const l4PoolName = l4.poolName;
export const h100MachineType = h100.machineType;
