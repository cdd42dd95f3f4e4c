"""A point-in-time restore's recovery, in the guest: the settings that make PostgreSQL
replay the archived WAL the boot fetched up to the target (``recover_to``), and a run
of its own postmaster that carries it out (``replay``). Archive recovery does not run
in single-user mode, where the rest of a restore's first boot happens.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from guest import files
from guest.disk import Host, conf_quote, include, tail

RESTORE_LOG = "restore.log"  # the recovery's server log, on the data disk


def recover_to(data: Path, command: str, target: str | None, lsn: str | None = None) -> None:
    """Have the next start of ``data`` replay WAL with ``command`` (its
    restore_command), up to the time ``target`` or the WAL location ``lsn`` (that
    record included), then end recovery on a new timeline."""
    lines = [
        f"restore_command = '{conf_quote(command)}'",
        "recovery_target_action = 'promote'",
    ]
    if target is not None:
        lines.append(f"recovery_target_time = '{target_time(target)}'")
    if lsn is not None:
        lines.append(f"recovery_target_lsn = '{conf_quote(lsn)}'")
    (data / files.RECOVERY_CONF).write_text("\n".join(lines) + "\n")
    include(data, files.RECOVERY_CONF)
    (data / "recovery.signal").write_text("")


def replay(data: Path, disk: Path, host: Host, major: int) -> None:
    """Run the recovery ``recover_to`` set up, with a postmaster of its own (archive
    recovery does not run in single-user mode): no network, no archiving, no hot
    standby (it answers only once promoted); then stop it with a checkpoint. A recovery
    that stops short (a target past the archive's end) fails the boot with its log."""
    log = disk / RESTORE_LOG
    log.unlink(missing_ok=True)
    sockets = Path(tempfile.mkdtemp(prefix="dbi-restore-"))
    host.own(sockets)
    options = (
        f"-c listen_addresses='' -c unix_socket_directories='{sockets}' "
        "-c hot_standby=off -c archive_mode=off"
    )
    pg_ctl = host.tool(major, "pg_ctl")
    try:
        host.run([pg_ctl, "start", "-D", str(data), "-l", str(log), "-o", options])
        while True:
            ready = host.run([host.tool(major, "pg_isready"), "-q", "-h", str(sockets)])
            if ready.returncode == 0:
                break  # recovered and promoted
            if not (data / "postmaster.pid").exists():
                said = log.read_text() if log.exists() else ""
                raise RuntimeError("replaying the archived WAL failed: " + tail(said))
            time.sleep(0.5)
        stopped = host.run([pg_ctl, "stop", "-w", "-m", "fast", "-D", str(data)])
        if stopped.returncode != 0:
            raise RuntimeError("stopping the recovered server failed: " + tail(stopped.stderr))
    finally:
        if (data / "postmaster.pid").exists():
            host.run([pg_ctl, "stop", "-w", "-m", "immediate", "-D", str(data)])
        shutil.rmtree(sockets, ignore_errors=True)


def target_time(value: str) -> str:
    """An RFC 3339 time as recovery_target_time takes it (a numeric offset: PostgreSQL
    refuses the abbreviation ``Z``)."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise RuntimeError(f"restore.target_time: {value!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise RuntimeError(f"restore.target_time: {value!r} has no offset")
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
