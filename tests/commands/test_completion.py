"""Shell completion: `dbi completion bash|zsh` prints a script, and the command line
answers the shell's completion requests (argcomplete's protocol), as bash does it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from devstack import tools


def complete(line: str, tmp_path: Path) -> list[str]:
    """What `dbi` offers for ``line`` with the cursor at its end."""
    answer = tmp_path / "answer"
    subprocess.run(
        [str(tools.venv_tool("dbi"))],
        env={
            **os.environ,
            "_ARGCOMPLETE": "1",
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
            "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
            "_ARGCOMPLETE_IFS": "\n",
        },
        check=True,
        capture_output=True,
        timeout=60,
    )
    return [word.strip() for word in answer.read_text().splitlines()]


def test_commands_and_their_options_complete(tmp_path: Path) -> None:
    assert complete("dbi sta", tmp_path) == ["status"]
    assert set(complete("dbi describe --temporal-", tmp_path)) == {
        "--temporal-address",
        "--temporal-namespace",
    }
    assert complete("dbi status -o ", tmp_path) == ["json", "yaml"]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_script_registers_dbi(shell: str) -> None:
    script = subprocess.run(
        [str(tools.venv_tool("dbi")), "completion", shell],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "_python_argcomplete" in script
    registered = "complete -o" if shell == "bash" else "compdef"
    assert registered in script and "dbi" in script
