"""GPU monitoring: the component, the DCGM exporter, the dashboard, the alert rules."""
