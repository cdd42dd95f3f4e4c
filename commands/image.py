"""``dbi image``: build the VM image an instance boots (``images/``), and print the
Harvester VirtualMachineImage that installs it.

``dbi image build --version 16.15`` builds a qcow2 for a PostgreSQL build (as root:
mmdebstrap, a loop mount), reusing one built from the same recipe; it prints where the
disk, its sha256 and the manifest are. ``dbi image manifest --version 16.15 --url URL``
prints the VirtualMachineImage for ``kubectl apply -f -``, once the qcow2 is published
at URL (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from images import build as images
from images import postgresql
from images.recipe import MIRROR, Recipe


def add_parsers(commands: Any) -> None:
    image = commands.add_parser(
        "image",
        help="build dbi's VM image for a PostgreSQL version (docs/guest.md)",
        description="Build the VM image a DBInstance boots, and its Harvester manifest.",
    )
    image_commands = image.add_subparsers(title="image commands")
    version = argparse.ArgumentParser(add_help=False)
    version.add_argument(
        "--version",
        required=True,
        help="the PostgreSQL build: 16.15, 16.15.0, or a major (its newest build)",
    )
    version.add_argument(
        "--cache",
        type=Path,
        default=None,
        help=f"where images are kept (default: {images.default_cache()})",
    )
    version.add_argument("--mirror", default=MIRROR, help="Debian's mirror (default: %(default)s)")

    build = image_commands.add_parser(
        "build",
        parents=[version],
        help="build the image (as root), or find it built",
        description="Build a bootable qcow2 for the PostgreSQL build, unless one built from "
        "the same recipe is in the cache; print where it is. Needs root, mmdebstrap, "
        "e2fsprogs, extlinux and qemu-utils. Exit 0 built or found, 1 the build failed.",
    )
    build.set_defaults(run=_build)
    manifest = image_commands.add_parser(
        "manifest",
        parents=[version],
        help="print the VirtualMachineImage of a built image",
        description="Print the Harvester VirtualMachineImage that downloads the built image "
        "from --url, with its SHA-512 and the label dbi's preflight reads.",
    )
    manifest.add_argument("--url", required=True, help="where the qcow2 is published")
    manifest.add_argument(
        "--namespace",
        default="default",
        help="the image's namespace, one of DBI_IMAGES' (default: %(default)s)",
    )
    manifest.set_defaults(run=_manifest)


def _recipe(args: argparse.Namespace) -> Recipe:
    return Recipe(postgresql.full_version(args.version), mirror=args.mirror)


def _build(args: argparse.Namespace) -> int:
    try:
        image = images.build(_recipe(args), args.cache or images.default_cache())
    except (images.BuildFailed, postgresql.FetchFailed) as e:
        print(f"dbi: {e}", file=sys.stderr)
        return 1
    said = image.describe()
    print(f"image     {image.disk} ({int(str(said['bytes'])) >> 20} MiB)")
    print(f"sha256    {said['sha256']}")
    print(f"manifest  dbi image manifest --version {image.recipe.version} --url URL")
    return 0


def _manifest(args: argparse.Namespace) -> int:
    try:
        recipe = _recipe(args)
    except postgresql.FetchFailed as e:
        print(f"dbi: {e}", file=sys.stderr)
        return 2
    image = images.cached(recipe, args.cache or images.default_cache())
    if image is None:
        print(
            f"dbi: no image of PostgreSQL {recipe.version} is built from this recipe; "
            f"run `dbi image build --version {args.version}` first",
            file=sys.stderr,
        )
        return 1
    sha512 = str(image.describe()["sha512"])
    body = images.manifest(recipe, sha512, url=args.url, namespace=args.namespace)
    print(yaml.safe_dump(body, sort_keys=False), end="")
    return 0
