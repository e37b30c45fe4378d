#!/usr/bin/env bash
# Installs everything stm32ai needs on a fresh Debian machine with Python 3.11:
# the Arm GCC toolchain, newlib and QEMU from Debian, the Python package (editable) with its test
# extra: both references (TFLite Micro, LiteRT via [litert]) and the test tools (docs/references.md).
set -euo pipefail
need_apt=()
command -v arm-none-eabi-gcc >/dev/null || need_apt+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
[ -d /usr/lib/arm-none-eabi/newlib ] || need_apt+=(libnewlib-arm-none-eabi)
command -v qemu-system-arm >/dev/null || need_apt+=(qemu-system-arm)
command -v make >/dev/null || need_apt+=(make)
command -v cc >/dev/null || need_apt+=(gcc)
# tests/test_wheel.py makes a fresh virtual environment: Debian's python3 has no ensurepip without it
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi
python3 -m pip install -q --upgrade pip
python3 -m pip install -q -e '.[test]'
