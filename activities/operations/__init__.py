"""The activities that are not steps: what a user or a schedule asks for beside
convergence (a backup, a major upgrade, a credential rotation, the reaper of deleted
backups' files), each run by its own workflow or update."""
