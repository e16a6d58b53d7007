"""The VPC built for GKE: its model and component."""
