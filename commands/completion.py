"""Shell completion: ``dbi completion bash|zsh`` prints the script a shell loads
(argcomplete's), and ``kubectl_complete-dbi`` answers kubectl's own completion of its
plugin (kubectl 1.26+ runs it for ``kubectl dbi <TAB>``)."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from argcomplete.shell_integration import shellcode

# Cobra's ShellCompDirectiveNoFileComp: kubectl offers no file names besides ours.
NO_FILE_COMPLETION = 4


def add_parser(commands: Any) -> None:
    completion = commands.add_parser(
        "completion",
        help="print the shell completion script (bash or zsh)",
        description="Print the script that completes dbi's commands, options and instance "
        "names; load it with `source <(dbi completion bash)` (or zsh), or put it where your "
        "shell loads completions. `kubectl dbi` completes through kubectl_complete-dbi, "
        "installed beside kubectl-dbi.",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(run=_script)


def _script(args: argparse.Namespace) -> int:
    print(shellcode(["dbi"], shell=args.shell))
    return 0


def request(line: str, answer: Path) -> dict[str, str]:
    """The environment in which a shell asks ``dbi`` to complete ``line`` (the cursor at
    its end), as argcomplete's bash script does: the answer goes to the file ``answer``,
    one completion per line."""
    return {
        "_ARGCOMPLETE": "1",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
        "_ARGCOMPLETE_IFS": "\n",
    }


def kubectl_complete() -> NoReturn:
    """The ``kubectl_complete-dbi`` console script. kubectl runs it with the words after
    ``kubectl dbi``, the last one the word being completed (maybe empty), and reads
    Cobra's answer: one completion per line, then ``:<directive>``. The answer is
    argcomplete's for the same line, asked of ``dbi`` as a shell would ask it."""
    *done, partial = sys.argv[1:] or [""]
    line = " ".join(filter(None, ["dbi", shlex.join(done), partial]))
    if not partial:
        line += " "
    with tempfile.TemporaryDirectory(prefix="dbi-complete-") as directory:
        answer = Path(directory) / "answer"
        subprocess.run(
            [sys.executable, "-c", "from commands.main import run; run()"],
            env={**os.environ, **request(line, answer)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=30,
        )
        words = answer.read_text().splitlines() if answer.exists() else []
    for word in words:
        print(word.strip())
    print(f":{NO_FILE_COMPLETION}")
    sys.stdout.flush()
    os._exit(0)
