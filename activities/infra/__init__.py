"""How the activities reach the world: the cluster (``kube``, ``views``), an instance's
PostgreSQL (``postgres``, ``trust``), the backup store, Temporal's Schedules, and what
two steps share about an instance (its address, machine, volumes, Secrets, children).
Nothing here decides a step's result; nothing here imports a step."""
