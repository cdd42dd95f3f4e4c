"""A backup's tarball is unpacked under the data directory only: with the tar "data"
filter where the guest's Python has it, and by the same checks on a Python without it
(Debian bookworm's 3.11.2, which dbi's image runs)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from guest.boot import extract


@pytest.fixture(params=["filter", "by-hand"])
def python(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test on this Python, and as on one without ``tarfile.data_filter``."""
    if request.param == "by-hand":
        monkeypatch.delattr(tarfile, "data_filter")
    return str(request.param)


def tarball(*members: tarfile.TarInfo, data: bytes = b"rows") -> tarfile.TarFile:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for member in members:
            content = io.BytesIO(data) if member.isfile() else None
            if member.isfile():
                member.size = len(data)
            tar.addfile(member, content)
    raw.seek(0)
    return tarfile.open(fileobj=raw)


def member(
    name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o600
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    return info


def test_a_backup_unpacks_with_its_directories_and_links(python: str, tmp_path: Path) -> None:
    with tarball(
        member("base", tarfile.DIRTYPE, mode=0o700),
        member("base/1", mode=0o4600),
        member("pg_wal_link", tarfile.SYMTYPE, link="base/1"),
    ) as tar:
        extract(tar, tmp_path / "pgdata")
    assert (tmp_path / "pgdata" / "base" / "1").read_bytes() == b"rows"
    assert (tmp_path / "pgdata" / "pg_wal_link").resolve() == tmp_path / "pgdata" / "base" / "1"
    assert not (tmp_path / "pgdata" / "base" / "1").stat().st_mode & 0o4000  # no setuid


@pytest.mark.parametrize(
    "evil",
    [
        member("../outside"),
        member("link", tarfile.SYMTYPE, link="/etc/passwd"),
        member("link", tarfile.SYMTYPE, link="../../outside"),
        member("hard", tarfile.LNKTYPE, link="../outside"),
        member("dev", tarfile.CHRTYPE),
    ],
    ids=["dotdot", "symlink-absolute", "symlink-up", "hardlink-up", "device"],
)
def test_a_member_outside_the_directory_stops_the_restore(
    python: str, tmp_path: Path, evil: tarfile.TarInfo
) -> None:
    target = tmp_path / "data" / "pgdata"
    with tarball(member("ok"), evil) as tar, pytest.raises(RuntimeError, match="backup"):
        extract(tar, target)
    assert not (tmp_path / "data" / "outside").exists()
    assert not (tmp_path / "outside").exists()


def test_an_absolute_name_lands_inside_or_stops_the_restore(python: str, tmp_path: Path) -> None:
    """The data filter unpacks ``/x`` as ``x`` under the directory; by hand it is refused."""
    target = tmp_path / "pgdata"
    name = f"{tmp_path}/outside"
    with tarball(member(name)) as tar:
        if python == "filter":
            extract(tar, target)
            assert (target / name.lstrip("/")).exists()
        else:
            with pytest.raises(RuntimeError, match="outside its directory"):
                extract(tar, target)
    assert not (tmp_path / "outside").exists()
