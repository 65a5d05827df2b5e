"""attled's test tools: the Bumble peers, the process drivers, the benches and soaks.

    peers/    the LED peers and the random GATT database peer (Bumble devices)
    drivers/  processes and worlds: vworld (the virtual air, its parts in
              air/), rcworld (Root Canal), worldproc / attledproc /
              mqttbroker (a vworld, attled, mosquitto process from Python),
              bumble_central (the reference central), bumble_gatt_central
              (a central on Bumble's GATT client and SMP: pairing and bonds,
              read-back, notifications, database dump, long-read throughput,
              ATT round trips; its dump in bumble_gatt_dump), the run both
              centrals share in bumble_job
    bench/    make bench: bench, gatewaybench, gatewayair, gateway_reference
    soak/     make soak: soak, gatewaysoak (and its gatewaymodel,
              gatewayprocs, gatewayfigures)
    halight   the Home Assistant light as attled's gateway keeps it (the
              soak's expectations, the reference gateway's state)
    maint/    repository upkeep: doccoverage, make_golden; dbhash (Bumble's
              GATT Database Hash of a board profile or a database JSON)
    demo      make demo

The package is installed into the venv in editable mode (Tools/pyproject.toml;
``make venv`` runs ``pip install -e Tools``), so the venv's Python imports it
from any directory: ``.venv/bin/python -m attledtools.drivers.vworld ...``, as
the Makefile runs the scripts, and the tests.  A process started from here or
from the tests with ``module_command`` runs on the same Python, and so finds
the package too.
"""

from __future__ import annotations

import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent  # the checkout's Tools/ (the install is editable)
REPO_ROOT = TOOLS.parent


def module_command(module: str, *args: str) -> list[str]:
    """The command line that runs ``module`` (e.g. "attledtools.drivers.vworld")
    with this Python."""
    return [sys.executable, "-m", module, *args]
