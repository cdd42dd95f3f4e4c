"""The files dbi and the guest agree on: where the document lands, and what the data
directory holds that either side writes or reads (the orchestrator over SQL, as the
admin). The orchestrator imports these names; nothing here imports dbi."""

from __future__ import annotations

# cloud-init drops the bootstrap document here (mode 0600) and runs COMMAND on it at
# every boot.
DOCUMENT = "/etc/dbi/bootstrap.json"
COMMAND = "/usr/local/bin/dbi-bootstrap"
# What a boot prepared, for the image's PostgreSQL and exporter units (shell variables:
# PGBIN, PGDATA, DBI_ADMIN_USER); /run is empty at each boot.
ENV_FILE = "/run/dbi/postgresql.env"

# On the data disk: the data directory a boot uses is the one CURRENT names (a major
# upgrade's), else DATA.
DATA = "pgdata"
CURRENT = "current"
# pg_upgrade's script that deletes the old data directory (in the disk's root).
DELETE_OLD_CLUSTER = "delete_old_cluster.sh"

# On the data disk, beside the data directory: the WAL spool (``guest.archive``), with
# the orchestrator's lease ("until <seconds since the epoch>") and the names it stored
# (SYSTEM/NAME.gz, one per line), both written by it over SQL.
WAL_SPOOL = "wal-spool"
SPOOL_LEASE = "lease"
SPOOL_UPLOADED = "uploaded"
SPOOLED_SUFFIX = ".gz"
# On the data disk during a point-in-time restore: the archived WAL it replays.
RESTORE_WAL = "restore-wal"
# On a replica's data disk: the replication role's passfile and the CA that verifies
# the primary (guest.replica).
REPLICA_PASSFILE = "replication.pgpass"
REPLICA_CA = "replication-ca.crt"
REPLICA_NO_CERT = "replication-no-client.crt"  # never written: no client certificate

# In the data directory.
UPGRADE_REPORT = "dbi-upgrade.json"  # a boot's report of an upgrade (read over SQL)
RESET_APPLIED = "dbi-reset-applied"  # the reset token this data has applied
VM_CONF = "dbi-vm.conf"  # the settings that follow the VM's size (included)
TLS_CONF = "dbi-tls.conf"  # ssl on, and which slot's pair is served (included)
ARCHIVE_CONF = "dbi-archive.conf"  # archive_mode and archive_command (included)
RECOVERY_CONF = "dbi-recovery.conf"  # a point-in-time restore's settings (included)
REPLICA_CONF = "dbi-replica.conf"  # a replica's primary_conninfo and slot (included)

# What the guest's PostgreSQL is configured with, by the boot and by a live renewal
# alike.
PG_HBA = """\
# Written by dbi: TLS with SCRAM-SHA-256 only; a connection without TLS is refused.
# Replication connections (dbi's backups: pg_basebackup) only for roles that have the
# REPLICATION attribute (dbi's admin role; the app role has not).
hostssl all all 0.0.0.0/0 scram-sha-256
hostssl all all ::/0 scram-sha-256
hostssl replication all 0.0.0.0/0 scram-sha-256
hostssl replication all ::/0 scram-sha-256
hostnossl all all 0.0.0.0/0 reject
hostnossl all all ::/0 reject
hostnossl replication all 0.0.0.0/0 reject
hostnossl replication all ::/0 reject
# Inside the VM only: the guest's own agents (the metrics exporter) over the Unix
# socket, as PostgreSQL's operating system user (postgres) mapped to the admin role
# (pg_ident.conf, map "dbi"); no other local user is admitted.
local all all peer map=dbi
"""


def pg_ident(admin_user: str, login: str) -> str:
    """The map PG_HBA's local line names: PostgreSQL's user ``login``, as the admin role."""
    return f"# Written by dbi: the guest's agents, as the admin role.\ndbi {login} {admin_user}\n"


# Two slots for the certificate and key: a renewal writes the slot not in use, then
# points TLS_CONF at it, so a pair is never overwritten while served. The boot writes
# slot a and leaves slot b's files there, empty, mode 0600: a renewal written through
# SQL (lo_export makes new files 0644, which PostgreSQL refuses for a key) truncates
# files that exist and so keeps their mode.
SLOTS = ("a", "b")


def tls_files(cert_pem: str, key_pem: str, slot: str = SLOTS[0]) -> dict[str, str]:
    """Return the files, relative to the data directory, that make PostgreSQL serve
    ``cert_pem`` from ``slot``: the certificate, its key, and the settings that point
    at them (written last)."""
    stem = f"dbi-server-{slot}"
    conf = f"ssl = on\nssl_cert_file = '{stem}.crt'\nssl_key_file = '{stem}.key'\n"
    return {f"{stem}.crt": cert_pem, f"{stem}.key": key_pem, TLS_CONF: conf}


def other_slot(key_file: str) -> str:
    """Return the slot a renewal writes, given the key file PostgreSQL uses now."""
    return SLOTS[1] if key_file.endswith(f"dbi-server-{SLOTS[0]}.key") else SLOTS[0]
