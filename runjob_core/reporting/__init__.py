"""Reports, metrics history, the dashboard and the activity log: what a job did, at a glance."""
