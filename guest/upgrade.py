"""A major upgrade at boot (the document's ``upgrade``): data not shut down cleanly is
first recovered by a single-user server of the old major; ``pg_upgrade --check``, then a
copy into ``pgdata-<major>`` beside the old data directory, which stays until the
orchestrator deletes it (``delete_old_cluster.sh``); ``current`` names the directory a
boot uses. A failure leaves the old data booting. ``action: rollback`` boots the old
directory again. Each outcome is reported once per token in ``dbi-upgrade.json``, in the
data directory the boot uses, where the orchestrator reads it over SQL.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from guest import files
from guest.disk import Host, data_major, include, pgdata, tail
from guest.document import Upgrade


def apply(
    upgrade: Upgrade, admin_user: str, disk: Path, host: Host, image_major: int
) -> str | None:
    """Carry out (or roll back) the document's upgrade once (the server down), and
    report it in the data directory the boot then uses; return the report's phase when
    this boot wrote one."""
    old, major = pgdata(disk), data_major(disk)
    if upgrade.action == "rollback":
        return _roll_back(upgrade, disk, host)
    if major == upgrade.to_major or report_of(old).get("token") == upgrade.token:
        return None  # done, or failed already: the orchestrator decides what comes next
    if major != upgrade.from_major or image_major != upgrade.to_major:
        said = (
            f"the data is PostgreSQL {major} and the root disk's {image_major}, not "
            f"{upgrade.from_major} and {upgrade.to_major}"
        )
        return _write_report(old, host, upgrade, phase="check", output=said)
    new = disk / f"{files.DATA}-{upgrade.to_major}"
    shutil.rmtree(new, ignore_errors=True)
    hba = (old / "pg_hba.conf").read_text()
    try:
        failed = _pg_upgrade(old, new, disk, host, upgrade, admin_user)
    finally:
        (old / "pg_hba.conf").write_text(hba)
    if failed is not None:
        phase, output = failed
        shutil.rmtree(new, ignore_errors=True)
        (disk / files.DELETE_OLD_CLUSTER).unlink(missing_ok=True)
        return _write_report(old, host, upgrade, phase=phase, output=output)
    include(new, files.VM_CONF)
    _point_at(disk, new)
    return _write_report(new, host, upgrade, phase="upgraded", output="", old=old.name)


def _pg_upgrade(
    old: Path, new: Path, disk: Path, host: Host, upgrade: Upgrade, admin_user: str
) -> tuple[str, str] | None:
    """initdb the new data directory, then pg_upgrade --check and pg_upgrade (copy),
    over a private socket with trust (the guest's own, for the run only); return the
    phase that failed and pg_upgrade's last lines, or None."""
    was, to = upgrade.from_major, upgrade.to_major
    control = host.run([host.tool(was, "pg_controldata"), str(old)]).stdout
    if "Database cluster state:               shut down\n" not in control:
        recovered = _recover(old, host, was)
        if recovered is not None:
            return "check", recovered
    initdb = [host.tool(to, "initdb"), "-D", str(new), "-U", admin_user, "-E", "UTF8"]
    if to >= 18 and "Data page checksum version:           0" in control:
        initdb.append("--no-data-checksums")  # 18 turns them on; pg_upgrade wants equal
    ran = host.run([*initdb, "--auth=trust", "--no-sync"])
    if ran.returncode != 0:
        return "check", tail(ran.stdout + ran.stderr)
    (old / "pg_hba.conf").write_text("local all all trust\n")
    (new / "pg_hba.conf").write_text("local all all trust\n")
    # A short path: a Unix socket's path is at most 107 bytes (a disk's can be longer).
    sockets = Path(tempfile.mkdtemp(prefix="dbi-upgrade-"))
    host.own(sockets)
    try:
        for phase, extra in (("check", ["--check"]), ("copy", [])):
            ran = host.run(
                [
                    host.tool(to, "pg_upgrade"),
                    *extra,
                    *("-b", str(host.binaries[was]), "-B", str(host.binaries[to])),
                    *("-d", str(old), "-D", str(new), "-U", admin_user, "-s", str(sockets)),
                ],
                cwd=disk,
            )
            if ran.returncode != 0:
                return phase, tail(ran.stdout + ran.stderr)
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    return None


def _recover(data: Path, host: Host, major: int) -> str | None:
    """Bring a cluster that was not shut down cleanly (a VM that lost power) to a clean
    shutdown: a single-user server of its own major replays its WAL and, at the end of
    its input, writes the shutdown checkpoint pg_upgrade requires. Return what it said
    if it failed."""
    ran = host.run([host.tool(major, "postgres"), "--single", "-D", str(data), "postgres"])
    if ran.returncode != 0:
        return "recovering the old cluster: " + tail(ran.stdout + ran.stderr)
    return None


def _roll_back(upgrade: Upgrade, disk: Path, host: Host) -> str | None:
    """Boot the old data directory again, if the upgrade's is in use and the old one
    is still there, and drop the new one."""
    new = pgdata(disk)
    report = report_of(new)
    old = disk / str(report.get("old") or "")
    if report.get("token") != upgrade.token or not report.get("old") or not old.is_dir():
        return None
    _point_at(disk, old)
    shutil.rmtree(new, ignore_errors=True)
    (disk / files.DELETE_OLD_CLUSTER).unlink(missing_ok=True)
    return _write_report(old, host, upgrade, phase="rolled-back", output="")


def _point_at(disk: Path, data: Path) -> None:
    staged = disk / f".{files.CURRENT}"
    staged.write_text(data.name)
    staged.rename(disk / files.CURRENT)


def _write_report(
    data: Path, host: Host, upgrade: Upgrade, *, phase: str, output: str, old: str | None = None
) -> str:
    """Write the upgrade's report where the orchestrator reads it; return its phase."""
    ok = phase == "upgraded"
    report: dict[str, object] = {"token": upgrade.token, "ok": ok, "phase": phase}
    report["output"] = output
    if old is not None:
        report["old"] = old
    path = data / files.UPGRADE_REPORT
    path.write_text(json.dumps(report))
    host.own(path)
    return phase


def report_of(data: Path) -> dict[str, object]:
    """The upgrade report in a data directory, or {}."""
    try:
        found = json.loads((data / files.UPGRADE_REPORT).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
