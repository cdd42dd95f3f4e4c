"""Backup rules without I/O: retention, names, store locations, the DBBackup CRD."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dbi import crd
from dbi.backup_spec import ARCHIVE_TIMEOUT_DEFAULT, Backup, BackupRetention
from dbi.backups import (
    BackupPhase,
    Held,
    StoreKind,
    StoreLocation,
    backup_name,
    expired,
    wal_prefix,
)
from guest import boot

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
C, F, R = BackupPhase.COMPLETED, BackupPhase.FAILED, BackupPhase.RUNNING


def held(*backups: tuple[str, BackupPhase | None, float]) -> list[Held]:
    """Backups as (name, phase, age in hours)."""
    return [Held(n, p, NOW - timedelta(hours=age)) for n, p, age in backups]


@pytest.mark.parametrize(
    ("backups", "retention", "doomed"),
    [
        pytest.param(
            held(("a", C, 4), ("b", C, 3), ("c", C, 2), ("d", C, 1)),
            BackupRetention(count=2),
            ["a", "b"],
            id="count-keeps-the-newest",
        ),
        pytest.param(
            held(("a", C, 50), ("b", C, 30), ("c", C, 1)),
            BackupRetention(count=10, max_age="24h"),
            ["a", "b"],
            id="max-age",
        ),
        pytest.param(
            held(("a", C, 50), ("b", C, 30)),
            BackupRetention(count=10, max_age="24h"),
            ["a"],
            id="the-newest-completed-stays-however-old",
        ),
        pytest.param(
            held(("a", F, 5), ("b", C, 3), ("c", F, 1)),
            BackupRetention(count=5),
            ["a"],
            id="a-failed-one-goes-once-a-newer-completed",
        ),
        pytest.param(
            held(("a", R, 5), ("b", C, 3), ("c", C, 1)),
            BackupRetention(count=1),
            ["b"],
            id="a-running-one-never-goes",
        ),
        pytest.param(
            held(("a", F, 5), ("b", None, 3)), BackupRetention(count=1), [], id="none-done"
        ),
        pytest.param(
            held(("a", F, 5), ("b", F, 4), ("c", F, 3), ("d", None, 1)),
            BackupRetention(count=2),
            ["a"],
            id="failures-do-not-pile-up",
        ),
    ],
)
def test_retention_deletes_what_it_no_longer_keeps(
    backups: list[Held], retention: BackupRetention, doomed: list[str]
) -> None:
    """Completed backups beyond count or older than maxAge go, oldest first; the newest
    completed one always stays; failed ones go once a newer one completed."""
    assert expired(backups, retention, NOW) == doomed


def test_the_wal_of_an_instance_and_of_one_of_its_systems_share_a_prefix() -> None:
    """S3 keys are taken as written: ``uid//7716`` is not ``uid/7716``."""
    assert wal_prefix("team-a", "db", "u-1", "") == "team-a/db/_wal/u-1/"
    assert wal_prefix("team-a", "db", "u-1", "7716") == "team-a/db/_wal/u-1/7716/"
    assert wal_prefix("team-a", "db", "u-1", "") + "7716/x.gz" == (
        wal_prefix("team-a", "db", "u-1", "7716") + "x.gz"
    )


def test_a_backup_is_named_after_its_instance_and_start_time_in_utc() -> None:
    """Names sort by time and stay DNS labels."""
    started = datetime(2026, 12, 1, 4, 5, 6, tzinfo=UTC).astimezone(
        datetime.now().astimezone().tzinfo
    )
    assert backup_name("orders", started) == "orders-20261201-040506"


@pytest.mark.parametrize(
    ("url", "kind", "bucket", "prefix"),
    [
        ("s3://backups", StoreKind.S3, "backups", ""),
        ("s3://backups/team-a/pg/", StoreKind.S3, "backups", "team-a/pg/"),
        ("file:///var/lib/dbi/backups/", StoreKind.FILE, "", "/var/lib/dbi/backups"),
    ],
)
def test_a_store_location_reads_as_written(
    url: str, kind: StoreKind, bucket: str, prefix: str
) -> None:
    assert StoreLocation.parse(url) == StoreLocation(kind, bucket, prefix)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("s3://backups", "s3://backups/"),
        ("s3://backups/team-a/pg", "s3://backups/team-a/pg/"),
        ("file:///var/lib/dbi/backups", "file:///var/lib/dbi/backups/"),
    ],
)
def test_a_store_location_ends_where_its_keys_begin(url: str, shown: str) -> None:
    """A backup's location (status.location) is the store's URL with its key appended:
    the store's URL ends in `/`, a directory's too."""
    location = StoreLocation.parse(url)
    assert location.url() == shown


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://s3.example/backups", "must be s3://<bucket>"),
        ("s3://Backups", "must name a bucket"),
        ("file://relative/dir", "absolute directory"),
        ("file:///", "absolute directory"),
    ],
)
def test_a_malformed_store_location_says_why(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StoreLocation.parse(url)


def test_the_committed_dbbackup_crd_is_rendered_from_the_models(repo_root: Path) -> None:
    """crds/dbbackup.yaml is exactly what `python -m dbi.crd --backup` renders."""
    committed = (repo_root / "crds" / "dbbackup.yaml").read_text()
    assert committed == crd.backup_yaml(), "run: python -m dbi.crd --backup > crds/dbbackup.yaml"


@pytest.mark.parametrize(
    ("written", "setting"),
    [("30s", "30s"), ("5m", "300s"), ("1h30m", "5400s"), ("24h", "86400s")],
)
def test_archive_timeout_is_written_as_postgresql_reads_it(written: str, setting: str) -> None:
    """Go durations ('5m') are not PostgreSQL's ('5min'): the setting goes in seconds."""
    backup = Backup.model_validate({"schedule": "@daily", "archiveTimeout": written})
    assert Backup.parameters(backup) == {"archive_timeout": setting}
    assert Backup.parameters(Backup(schedule="@daily")) == {}  # the guest's default stays
    assert Backup.parameters(None) == {}


def test_the_default_archive_timeout_the_spec_describes_is_the_guests() -> None:
    assert ARCHIVE_TIMEOUT_DEFAULT == boot.ARCHIVE_TIMEOUT_SECONDS
