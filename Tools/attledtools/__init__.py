"""attled's test tools: the Bumble peers, the process drivers, the benches and soaks.

    peers/    the LED peers and the random GATT database peer (Bumble devices)
    drivers/  processes and worlds: vworld (the virtual air, its parts in
              air/), rcworld (Root Canal), worldproc / attledproc /
              mqttbroker (a vworld, attled, mosquitto process from Python),
              bumble_central (the reference central), bumble_gatt_central
              (a central on Bumble's GATT client and SMP: pairing and bonds,
              read-back, notifications, database dump, long-read throughput,
              ATT round trips; its dump in bumble_gatt_dump)
    bench/    make bench: bench, gatewaybench, gatewayair, gateway_reference
    soak/     make soak: soak, gatewaysoak (and its gatewaymodel,
              gatewayprocs, gatewayfigures)
    maint/    repository upkeep: doccoverage, make_golden; dbhash (Bumble's
              GATT Database Hash of a board profile or a database JSON)
    demo      make demo

The package is importable with Tools/ on the module path: PYTHONPATH=Tools for
the scripts (``PYTHONPATH=Tools .venv/bin/python -m attledtools.drivers.vworld
...``, as the Makefile runs them), pytest's ``pythonpath`` (pytest.ini) for
the tests.  A process started from here or from the tests gets it through
``module_command`` and ``module_env``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent  # the directory holding this package
REPO_ROOT = TOOLS.parent


def module_command(module: str, *args: str) -> list[str]:
    """The command line that runs ``module`` (e.g. "attledtools.drivers.vworld")
    with this Python; start it with ``env=module_env()``."""
    return [sys.executable, "-m", module, *args]


def module_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with Tools/ first on
    PYTHONPATH, so that a child ``python -m attledtools...`` finds the package
    whatever its working directory."""
    env = dict(os.environ if base is None else base)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != TOOLS]
    env["PYTHONPATH"] = os.pathsep.join([str(TOOLS), *paths])
    return env
