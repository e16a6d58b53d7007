"""MultiKueue fleets: one manager cluster holding the teams' queues, GPU worker clusters in other
regions running the jobs it dispatches (docs/fleet.md)."""
