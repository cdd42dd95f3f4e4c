"""The backup store's two implementations, against real storage: a directory, and an
S3-compatible server running on this machine (devstack.s3server, gofakes3)."""

from __future__ import annotations

import contextlib
import http.server
import os
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from activities.infra.backupstore import DirectoryStore, S3Store, Store
from dbi.backups import StoreLocation
from tests.httpfake import serving
from tests.stack import S3_BUCKET


@pytest.fixture(params=["directory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    if request.param == "directory":
        return DirectoryStore(StoreLocation.parse(f"file://{tmp_path / 'store'}"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "dbi-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dbi-test-secret")
    endpoint = request.getfixturevalue("s3_endpoint")
    prefix = f"s3://{S3_BUCKET}/{tmp_path.name}/"
    return S3Store(StoreLocation.parse(prefix), endpoint=endpoint)


def test_files_go_in_and_come_back_whole(store: Store, tmp_path: Path) -> None:
    """An upload of several parts (S3: multipart) downloads byte for byte."""
    data = os.urandom(70 * 2**20 + 123)  # more than one 64 MiB part
    (tmp_path / "base.tar.gz").write_bytes(data)
    store.upload("team-a/orders/b1/base.tar.gz", tmp_path / "base.tar.gz")
    store.download("team-a/orders/b1/base.tar.gz", tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == data


def test_keys_list_and_delete_by_prefix_only(store: Store) -> None:
    """Deleting one backup's prefix leaves another's (even one whose name extends it)."""
    for key in ("ns/db/b1/a", "ns/db/b1/dbi-backup.json", "ns/db/b10/a", "ns/other/b1/a"):
        store.write(key, b"x")
    assert store.keys("ns/db/b1/") == ["ns/db/b1/a", "ns/db/b1/dbi-backup.json"]
    assert store.delete("ns/db/b1/") == 2
    assert store.keys("ns/db/b1/") == []
    assert store.keys("ns/") == ["ns/db/b10/a", "ns/other/b1/a"]
    assert store.read("ns/db/b1/dbi-backup.json") is None
    assert store.read("ns/db/b10/a") == b"x"
    # One object's key deletes that object (an archived WAL file, say).
    assert store.delete("ns/db/b10/a") == 1
    assert store.keys("ns/") == ["ns/other/b1/a"]


def test_an_absent_object_is_none_or_file_not_found(store: Store, tmp_path: Path) -> None:
    assert store.read("nothing/here") is None
    with pytest.raises(FileNotFoundError):
        store.download("nothing/here", tmp_path / "x")


def test_an_s3_store_without_credentials_is_an_error_naming_them(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No anonymous requests: the store refuses to start without an access key."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        S3Store(StoreLocation.parse(f"s3://{S3_BUCKET}/x/"), endpoint=s3_endpoint)


def test_a_key_cannot_leave_the_directory_store(tmp_path: Path) -> None:
    store = DirectoryStore(StoreLocation.parse(f"file://{tmp_path / 'store'}"))
    with pytest.raises(ValueError, match="leaves the store"):
        store.write("../escaped", b"x")


STS_ANSWER = """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIA-FROM-STS</AccessKeyId>
      <SecretAccessKey>temporary-secret</SecretAccessKey>
      <SessionToken>session-token</SessionToken>
      <Expiration>{expires}</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"""


@contextlib.contextmanager
def fake_sts() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An STS endpoint that answers AssumeRoleWithWebIdentity with temporary keys valid
    for an hour, and records each request's parameters."""
    calls: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            query = urllib.parse.urlsplit(self.path).query
            calls.append(dict(urllib.parse.parse_qsl(query)))
            expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            body = STS_ANSWER.format(expires=expires).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url, calls


def test_a_web_identity_is_exchanged_at_sts_for_the_stores_credentials(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No keys, a web identity token (as IRSA mounts it): the worker asks STS for
    temporary credentials once, with the token and the role, and uses the store."""
    token = tmp_path / "token"
    token.write_text("eyJ-a-web-identity")
    role = "arn:aws:iam::123456789012:role/dbi-backups"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ROLE_ARN", role)
    with fake_sts() as (sts, calls):
        monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts)
        store = S3Store(
            StoreLocation.parse(f"s3://{S3_BUCKET}/{tmp_path.name}/"), endpoint=s3_endpoint
        )
        store.write("ns/db/b1/a", b"x")
        assert store.read("ns/db/b1/a") == b"x"
    (call,) = calls  # the temporary keys are kept until they expire
    assert call["Action"] == "AssumeRoleWithWebIdentity"
    assert call["WebIdentityToken"] == "eyJ-a-web-identity"
    assert call["RoleArn"] == role


def test_a_write_still_in_flight_is_not_a_key(tmp_path: Path) -> None:
    """A listing while the archiver writes a segment sees stored keys only, never the
    temporary file the write renames into place (a restore would read it as WAL)."""
    store = DirectoryStore(StoreLocation.parse(f"file://{tmp_path / 'store'}"))
    store.write("ns/db/_wal/u/1/000000010000000000000001.gz", b"segment")
    in_flight = tmp_path / "store" / "ns" / "db" / "_wal" / "u" / "1" / ".upload-abc123"
    in_flight.write_bytes(b"half a segment")
    assert store.keys("ns/db/_wal/") == ["ns/db/_wal/u/1/000000010000000000000001.gz"]
