"""The guest program's boot on real PostgreSQL binaries, outside any VM: initdb once with
the admin verifier, data never initialized over, a reset applied once, TLS and
pg_hba.conf every boot, an upgrade the root disk cannot run reported and the old data
booted, and ``dbi-bootstrap``'s exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from dbi import bootstrap, scram, tls
from devstack.vmstandin.guest import make_traversable
from guest import boot, files, recovery, upgrade
from guest import disk as disk_
from guest.document import parse
from tests.guest.conftest import MAJOR, SIZE


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    make_traversable(tmp_path)
    return tmp_path / "disk"


def document(password: str = "first-password", **fields: object) -> bootstrap.Bootstrap:  # noqa: S107
    return bootstrap.Bootstrap(admin_verifier=scram.verifier(password), **fields)  # type: ignore[arg-type]


def prepare(doc: bootstrap.Bootstrap, disk: Path, host: disk_.Host) -> boot.Booted:
    """Prepare as an image's boot does, on the document as the orchestrator writes it."""
    raw = parse(json.loads(bootstrap.to_document(doc)))
    return boot.prepare(raw, disk, host, image_major=MAJOR, size=SIZE)


def stored_verifier(disk: Path, host: disk_.Host) -> str:
    """The admin role's password as stored (single-user mode, the server down)."""
    ran = host.run(
        [host.tool(MAJOR, "postgres"), "--single", "-D", str(disk_.pgdata(disk)), "postgres"],
        stdin="SELECT rolpassword FROM pg_authid WHERE rolname = 'dbi_admin';\n",
    )
    assert ran.returncode == 0, ran.stderr
    return next(line.split('"')[1] for line in ran.stdout.splitlines() if "rolpassword =" in line)


def test_a_first_boot_initializes_once_and_a_later_boot_keeps_the_data(
    disk: Path, host: disk_.Host
) -> None:
    doc = document()
    first = prepare(doc, disk, host)
    assert (first.initialized, first.major, first.pgdata) == (True, MAJOR, disk / files.DATA)
    assert stored_verifier(disk, host) == doc.admin_verifier
    kept = first.pgdata / "rows-that-matter"
    kept.write_text("42")
    again = prepare(document("another-password"), disk, host)
    assert not again.initialized and kept.read_text() == "42"
    assert stored_verifier(disk, host) == doc.admin_verifier  # no reset asked: untouched


def test_a_disk_holding_files_but_no_cluster_is_never_initialized_over(
    disk: Path, host: disk_.Host
) -> None:
    found = disk / files.DATA / "base" / "16384"
    found.parent.mkdir(parents=True)
    found.write_text("someone's data")
    with pytest.raises(RuntimeError, match="holds files but no PG_VERSION"):
        prepare(document(), disk, host)
    assert found.read_text() == "someone's data"


def test_a_reset_token_sets_the_verifier_once(disk: Path, host: disk_.Host) -> None:
    prepare(document(), disk, host)
    reset = document("the-new-password", reset="token-1")
    assert prepare(reset, disk, host).reset
    assert stored_verifier(disk, host) == reset.admin_verifier
    changed = scram.verifier("set-since-by-an-operator")
    boot.set_admin_verifier(disk_.pgdata(disk), host, MAJOR, "dbi_admin", changed)
    assert not prepare(reset, disk, host).reset  # the same token: applied already
    assert stored_verifier(disk, host) == changed


def test_every_boot_installs_the_certificate_and_dbis_pg_hba(disk: Path, host: disk_.Host) -> None:
    ca = tls.new_ca("team-a")
    pair = tls.issue(ca, tls.service_names("team-a", "db"))
    data = prepare(
        document(server_cert=pair.cert_pem, server_key=SecretStr(pair.key_pem)), disk, host
    ).pgdata
    assert (data / "pg_hba.conf").read_text() == files.PG_HBA
    assert (data / "pg_ident.conf").read_text().splitlines()[-1] == "dbi nobody dbi_admin"
    assert (data / "dbi-server-a.key").read_text() == pair.key_pem
    assert (data / "dbi-server-a.key").stat().st_mode & 0o777 == 0o600
    assert (data / "dbi-server-b.key").read_text() == ""  # the renewal's slot, 0600 too
    conf = (data / "postgresql.conf").read_text()
    assert f"include_if_exists = '{files.TLS_CONF}'" in conf
    vm = (data / files.VM_CONF).read_text()
    assert "dbi.vm_cpus = '2'" in vm and "listen_addresses = '*'" in vm


def test_an_upgrade_the_root_disk_cannot_run_is_reported_and_the_old_data_boots(
    disk: Path, host: disk_.Host
) -> None:
    prepare(document(), disk, host)
    asked = bootstrap.Upgrade(from_major=MAJOR, to_major=MAJOR + 1, token="up-1")  # noqa: S106
    booted = prepare(document(upgrade=asked), disk, host)
    assert (booted.upgrade, booted.major, booted.pgdata) == ("check", MAJOR, disk / files.DATA)
    report = upgrade.report_of(booted.pgdata)
    assert (report["token"], report["ok"]) == ("up-1", False)
    assert "root disk's 17, not 17 and 18" in str(report["output"])
    assert not prepare(document(upgrade=asked), disk, host).upgrade  # reported once


def test_dbi_bootstrap_names_the_field_of_a_document_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps({"version": 5, "admin_verifier": "md5abc"}))
    ran = subprocess.run(
        [sys.executable, "-m", "guest", str(path), "--disk", str(tmp_path / "disk"), "--no-mount"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 2
    assert "admin_verifier: not a SCRAM-SHA-256 verifier" in ran.stderr
    assert not (tmp_path / "disk").exists()


def test_dbi_bootstrap_prints_what_to_boot(disk: Path, host: disk_.Host, tmp_path: Path) -> None:
    path = tmp_path / "bootstrap.json"
    path.write_text(bootstrap.to_document(document()))
    ran = subprocess.run(
        [
            *(sys.executable, "-m", "guest", str(path), "--disk", str(disk), "--no-mount"),
            f"--binaries={MAJOR}={host.binaries[MAJOR]}",
            *("--user", "nobody", "--cpus", "1", "--memory-bytes", str(1 << 29)),
            f"--env-file={tmp_path / 'run' / 'postgresql.env'}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout)
    assert said["pgdata"] == str(disk / files.DATA) and said["major"] == MAJOR
    assert said["bin"] == str(host.binaries[MAJOR]) and said["initialized"] is True
    # What the image's PostgreSQL and exporter units start with.
    env = (tmp_path / "run" / "postgresql.env").read_text().splitlines()
    assert env == [f"PGBIN={said['bin']}", f"PGDATA={said['pgdata']}", "DBI_ADMIN_USER=dbi_admin"]


@pytest.mark.parametrize(
    ("written", "taken"),
    [
        ("2026-12-07T02:50:06Z", "2026-12-07 02:50:06.000000+00"),
        ("2026-12-07T03:50:06.25+01:00", "2026-12-07 02:50:06.250000+00"),
    ],
)
def test_a_restore_target_is_written_as_recovery_target_time_takes_it(
    written: str, taken: str
) -> None:
    """PostgreSQL refuses a zone abbreviation (``Z``) in recovery_target_time."""
    assert recovery.target_time(written) == taken


@pytest.mark.parametrize("written", ["yesterday", "2026-12-07T02:50:06"])
def test_a_restore_target_without_a_time_or_an_offset_stops_the_boot(written: str) -> None:
    with pytest.raises(RuntimeError, match=r"restore\.target_time"):
        recovery.target_time(written)
