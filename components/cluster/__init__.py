"""The cluster: its model and rules, the GKE cluster component, an existing cluster."""
