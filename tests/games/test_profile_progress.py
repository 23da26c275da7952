"""``cooplab profile`` on a terminal shows each game's own progress (its rounds) under the profile's
"cells" bar, which names the game being played, as a single game run shows its rounds; on a pipe
(and with -q) no bar at all, and --json's stdout stays the profile alone. The games are the cells of
a grid sweep run in turn (cooplab/runs/sweeps.py ``_run_in_turn``): before, each game ran with its
progress bar off and a terminal saw one bar counting the games only."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

CLI = "import sys; from cooplab.cli import main; sys.exit(main(sys.argv[1:]))"
ARGS = ["profile", "--players", "random", "--simulations", "1", "--group-size", "3"]


def profile(out: Path, *extra: str, tty: bool) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``cooplab profile``, its stderr a terminal when ``tty``."""
    env = {**os.environ, "COLUMNS": "160"}
    env.pop("TQDM_DISABLE", None)
    if not tty:
        p = subprocess.run(
            [sys.executable, "-c", CLI, *ARGS, "--out", str(out), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        return p.returncode, p.stdout, p.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    p = subprocess.Popen(
        [sys.executable, "-c", CLI, *ARGS, "--out", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    err = bytearray()
    while True:  # the terminal's bytes until the process closed it (EIO on Linux)
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    assert p.stdout is not None
    stdout = p.stdout.read().decode()
    return p.wait(timeout=300), stdout, err.decode(errors="replace")


def test_a_profile_on_a_terminal_shows_each_games_rounds_and_its_name(tmp_path):
    code, stdout, err = profile(tmp_path / "tty", "--games", "cpr,public-goods", "--json", tty=True)
    assert code == 0, err[-2000:]
    assert json.loads(stdout)["games"]  # --json: stdout is the profile alone
    assert "cpr: playing" in err and "public-goods: playing" in err  # the per-game lines are kept
    assert "game rounds" in err  # each game's own bar (its rounds), as `cooplab run games` shows
    assert "game-cpr__s0" in err and "game-public-goods__s0" in err  # the cells bar names the game playing


def test_a_profile_on_a_pipe_draws_no_bar(tmp_path):
    code, stdout, err = profile(tmp_path / "pipe", "--games", "cpr", tty=False)
    assert code == 0, err[-2000:]
    assert "cpr: playing" in err and "game rounds" not in err and "cells" not in err
    assert "profile directory:" in stdout
