"""A guest is its tenant's machine: one that asks dbi for the admin password in clear
gets nothing. dbi's connections and pg_basebackup require SCRAM-SHA-256 bound to the
TLS channel (libpq's require_auth and channel_binding), and the instance stalls, saying
why, instead of resetting or rotating a password for such a guest."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from activities.infra import postgres
from activities.infra.admin_credential import name_for
from activities.infra.trust import trust_file
from activities.operations import basebackup
from dbi import bootstrap, names
from devstack import postgresql
from tests.security.tenancy import Tenancy, instance

pytestmark = pytest.mark.stack

# What a hostile guest serves: plain passwords, for sessions and replication alike.
CLEARTEXT_HBA = ("hostssl all all 0.0.0.0/0 password", "hostssl replication all 0.0.0.0/0 password")


def test_dbi_hba_admits_dbi_only_over_tls_with_scram() -> None:
    """The pg_hba.conf every boot writes accepts TLS with SCRAM-SHA-256 only from the
    network: every line is a hostssl line with scram-sha-256, or a reject; the one local
    line (the Unix socket, inside the VM) admits only what the map "dbi" names."""
    for line in bootstrap.PG_HBA.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if fields[0] == "local":
            assert fields[-2:] == ["peer", "map=dbi"]
            continue
        assert fields[-1] == "reject" or (fields[0], fields[-1]) == ("hostssl", "scram-sha-256")


def test_a_guest_asking_for_the_password_in_clear_gets_nothing(
    tenancy: Tenancy, tmp_path: Path
) -> None:
    """Mallory's guest (she is root in it) switches its pg_hba.conf to plain passwords:
    dbi's connection and pg_basebackup refuse before sending the admin password, and the
    instance stalls with InsecureAuthentication instead of resetting the password."""
    ns = tenancy.mallory
    tenancy.tenant("apply", "-n", ns, "-f", "-", stdin=instance("guest"))
    uid = tenancy.ready(ns, "guest")["metadata"]["uid"]
    password = (tenancy.secret(tenancy.home, name_for(uid)) or {})["password"]
    app = tenancy.secret(ns, "guest-credentials") or {}
    vmi = tenancy.get(ns, "guest", "virtualmachineinstance")
    server = postgres.Server(
        address=vmi["status"]["interfaces"][0]["ipAddress"],
        name=names.service_host(ns, "guest"),
        ca_file=trust_file(app["ca.crt"]),
    )
    with postgres.connect(server, password=password) as conn:  # what the guest's root does
        hba = conn.execute("SELECT current_setting('hba_file')").fetchone()
        assert hba is not None
        lines = ", ".join(f"'{line}'" for line in CLEARTEXT_HBA)
        conn.execute(f"COPY (SELECT unnest(ARRAY[{lines}])) TO '{hba[0]}'")
        conn.execute("SELECT pg_reload_conf()")

    with (
        pytest.raises(psycopg.OperationalError) as refused,
        postgres.connect(server, password=password),
    ):
        pass
    assert postgres.login_failure(refused.value) is postgres.Login.INSECURE, refused.value
    ran = subprocess.run(
        [
            str(postgresql.bin_dir() / "pg_basebackup"),
            f"--dbname={basebackup.conninfo(server)}",
            f"--pgdata={tmp_path / 'backup'}",
            "--no-password",
        ],
        env={"PGPASSWORD": password},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode != 0 and "cleartext password" in ran.stderr, ran.stderr

    annotation = f"{names.RECONCILE_REQUESTED_AT}=guest-asked-in-clear"
    tenancy.tenant("annotate", "dbinstance", "guest", "-n", ns, annotation)
    stalled = tenancy.stalled(ns, "guest")
    assert stalled["reason"] == postgres.INSECURE_REASON, stalled
    after = tenancy.secret(tenancy.home, name_for(uid)) or {}
    assert after.get("password") == password and "next" not in after  # nothing rotated
