#!/usr/bin/env bash
# Installs everything stm32ai needs on a fresh Debian machine with Python 3.11:
# the Arm GCC toolchain, newlib and QEMU from Debian, the Python package (editable) with its test
# extra: both references (TFLite Micro, LiteRT via [litert]) and the test tools (docs/references.md).
#
# QEMU: the emulated B-L475E-IOT01A (machine b-l475e-iot01a) needs QEMU >= 9; Debian 12 ships 7.2.
# When the installed qemu-system-arm lacks that machine, the backports suite of the machine's own
# Debian archive entry (its URI read from /etc/apt, so no host name is written here) is added as
# /etc/apt/sources.list.d/stm32ai-backports.sources and qemu-system-arm is installed from it.
# Backports are NotAutomatic (priority 100): nothing else is taken from them.
#
# Environment (for tests and careful users):
#   STM32AI_APT_DIR=DIR   read apt sources from DIR instead of /etc/apt (and write the new one there)
#   STM32AI_SETUP_DRY_RUN=1   print the commands instead of running them; write nothing
# `setup.sh --system-only` installs the Debian packages only (no pip).
# `setup.sh --print-backports-source` prints the deb822 entry it would add and exits
# (exit 3 when no Debian archive entry is found). Running the script twice changes nothing.
set -euo pipefail
APT_DIR=${STM32AI_APT_DIR:-/etc/apt}
DRY=${STM32AI_SETUP_DRY_RUN:-0}
QEMU_MACHINE=b-l475e-iot01a
BPO_FILE="$APT_DIR/sources.list.d/stm32ai-backports.sources"

codename() {
  local c=""
  [ -r /etc/os-release ] && c=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  echo "${STM32AI_CODENAME:-$c}"
}

# Prints "URI<TAB>SIGNED-BY" of the first enabled deb entry serving suite $1 (deb822 files first,
# then one-line sources.list files). Security and backports entries do not serve "$1" itself.
archive_entry() {
  local suite=$1 f
  for f in "$APT_DIR"/sources.list.d/*.sources; do
    [ -f "$f" ] && [ "$f" != "$BPO_FILE" ] || continue
    awk -v suite="$suite" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " suite " ") && uri != "") {
          print uri "\t" signed; found = 1; exit
        }
        types = ""; suites = ""; uri = ""; signed = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, ""); val = $0
        if (key == "types") types = val
        else if (key == "suites") suites = val
        else if (key == "uris") { split(val, u, " "); uri = u[1] }
        else if (key == "signed-by") signed = val
        else if (key == "enabled") enabled = tolower(val)
      }
      END { if (!found) flush() }' "$f" | head -n1 | grep . && return 0
  done
  for f in "$APT_DIR"/sources.list "$APT_DIR"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '
      /^[ \t]*deb[ \t]/ {
        line = $0; signed = ""
        if (match(line, /\[[^]]*\]/)) {
          opts = substr(line, RSTART + 1, RLENGTH - 2); line = substr(line, 1, RSTART - 1) substr(line, RSTART + RLENGTH)
          n = split(opts, o, " ")
          for (i = 1; i <= n; i++) if (o[i] ~ /^signed-by=/) { signed = o[i]; sub(/^signed-by=/, "", signed) }
        }
        split(line, w, /[ \t]+/)
        if (w[3] == suite) { print w[2] "\t" signed; exit }
      }' "$f" | head -n1 | grep . && return 0
  done
  return 1
}

backports_source() {
  local cn entry uri signed
  cn=$(codename)
  [ -n "$cn" ] || return 3
  entry=$(archive_entry "$cn") || return 3
  uri=${entry%%$'\t'*}
  signed=${entry#*$'\t'}
  printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\n' "$uri" "$cn"
  [ -z "$signed" ] || printf 'Signed-By: %s\n' "$signed"
}

run() {
  if [ "$DRY" = 1 ]; then echo "would run: $*"; else "$@"; fi
}

qemu_has_machine() {
  command -v qemu-system-arm >/dev/null && qemu-system-arm -M help 2>/dev/null | grep -q "^$QEMU_MACHINE "
}

if [ "${1:-}" = "--print-backports-source" ]; then
  backports_source || { echo "setup.sh: no Debian archive entry for suite '$(codename)' in $APT_DIR" >&2; exit 3; }
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need_apt=()
command -v arm-none-eabi-gcc >/dev/null || need_apt+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
[ -d /usr/lib/arm-none-eabi/newlib ] || need_apt+=(libnewlib-arm-none-eabi)
command -v make >/dev/null || need_apt+=(make)
command -v cc >/dev/null || need_apt+=(gcc)
# tests/test_into.py builds the CubeMX-layout fixture with its presets (generator Ninja)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
# tests/test_wheel.py makes a fresh virtual environment: Debian's python3 has no ensurepip without it
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
qemu_bpo=0
if ! qemu_has_machine; then
  if src=$(backports_source); then
    qemu_bpo=1
    if [ ! -f "$BPO_FILE" ] || [ "$(cat "$BPO_FILE")" != "$src" ]; then
      echo "setup.sh: adding $(codename)-backports (QEMU with machine $QEMU_MACHINE) as $BPO_FILE"
      if [ "$DRY" = 1 ]; then printf 'would write %s:\n%s\n' "$BPO_FILE" "$src"
      else printf '%s\n' "$src" | $SUDO tee "$BPO_FILE" >/dev/null; fi
    fi
  else
    echo "setup.sh: no Debian archive entry found in $APT_DIR: installing the distribution's" \
         "qemu-system-arm (machine $QEMU_MACHINE needs QEMU >= 9; its tests are skipped without it)" >&2
    command -v qemu-system-arm >/dev/null || need_apt+=(qemu-system-arm)
  fi
fi
if [ ${#need_apt[@]} -gt 0 ] || [ $qemu_bpo = 1 ]; then
  run $SUDO apt-get update -qq
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  run $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
if [ $qemu_bpo = 1 ]; then
  run $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t "$(codename)-backports" qemu-system-arm
  [ "$DRY" = 1 ] || qemu_has_machine || { echo "setup.sh: qemu-system-arm still lacks machine $QEMU_MACHINE" >&2; exit 1; }
fi
[ "${1:-}" = "--system-only" ] && exit 0
run python3 -m pip install -q --upgrade pip
run python3 -m pip install -q -e '.[test]'
