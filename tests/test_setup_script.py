"""scripts/setup.sh: the backports suite of the machine's own Debian archive entry, for QEMU >= 9.

Run against temporary copies of /etc/apt (STM32AI_APT_DIR) in dry-run mode: nothing is installed.
"""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "setup.sh"

DEB822 = """Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def _setup(tmp: Path, *args: str, qemu_lines: str | None = None, dry: bool = True,
           ) -> subprocess.CompletedProcess:
    env = dict(os.environ, STM32AI_APT_DIR=str(tmp / "apt"), STM32AI_CODENAME="bookworm",
               STM32AI_SETUP_DRY_RUN="1" if dry else "0")
    if qemu_lines is not None:     # a fake qemu-system-arm whose `-M help` lists these machines
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        q = bin_dir / "qemu-system-arm"
        q.write_text(f"#!/bin/sh\nprintf '%s\\n' '{qemu_lines}'\n")
        q.chmod(0o755)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return subprocess.run(["bash", str(SETUP), *args], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


@pytest.fixture
def apt(tmp_path):
    (tmp_path / "apt" / "sources.list.d").mkdir(parents=True)
    return tmp_path


def test_backports_from_deb822_entry(apt):
    (apt / "apt" / "sources.list.d" / "debian.sources").write_text(DEB822)
    p = _setup(apt, "--print-backports-source")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ("Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm-backports\n"
                        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")


def test_backports_from_one_line_entry(apt):
    (apt / "apt" / "sources.list").write_text(
        "# deb http://old.invalid/debian bookworm main\n"
        "deb http://security.invalid/debian-security bookworm-security main\n"
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/d.gpg] http://mirror2.invalid/debian bookworm main\n")
    p = _setup(apt, "--print-backports-source")
    assert p.returncode == 0, p.stderr
    assert "URIs: http://mirror2.invalid/debian\n" in p.stdout
    assert "Signed-By: /etc/apt/keyrings/d.gpg\n" in p.stdout


def test_disabled_or_missing_entry(apt):
    off = DEB822.replace("Types: deb\n#", "Enabled: no\nTypes: deb\n#", 1)
    (apt / "apt" / "sources.list.d" / "debian.sources").write_text(off)
    p = _setup(apt, "--print-backports-source")
    assert p.returncode == 3 and "no Debian archive entry" in p.stderr


def test_old_qemu_gets_backports_then_nothing_to_do(apt):
    d = apt / "apt" / "sources.list.d"
    (d / "debian.sources").write_text(DEB822)
    old = "netduinoplus2        Netduino Plus 2 Machine (Cortex-M4)"
    p = _setup(apt, "--system-only", qemu_lines=old)
    assert p.returncode == 0, p.stderr
    assert f"would write {d / 'stm32ai-backports.sources'}" in p.stdout
    assert "apt-get install -y -qq -t bookworm-backports qemu-system-arm" in p.stdout
    assert "pip" not in p.stdout
    # the file in place (as a real run leaves it): not written again, only the install is retried
    (d / "stm32ai-backports.sources").write_text(_setup(apt, "--print-backports-source").stdout)
    p = _setup(apt, "--system-only", qemu_lines=old)
    assert "would write" not in p.stdout and "-t bookworm-backports" in p.stdout
    # a QEMU that has the machine: no apt work for QEMU at all
    new = "b-l475e-iot01a       B-L475E-IOT01A Discovery Kit (Cortex-M4)"
    p = _setup(apt, "--system-only", qemu_lines=new)
    assert p.returncode == 0 and "backports" not in p.stdout
