"""ai_rows_move (runtime/src/ai_runtime_rows.c): a stripe's ring drop moves whole rows down, word by
word. Checked against the C library's memmove on the same bytes, at every alignment of both ends,
every overlap distance up to 40 bytes and lengths around the 16- and 4-byte loop boundaries, on
the host and on the Cortex-M4 (QEMU, where the unaligned word path runs)."""

import subprocess
from pathlib import Path

import pytest
from conftest import RUNTIME, WARN

# the self-test: each case moves n bytes from buf + so down by `dist` bytes (a move up too:
# the memmove fallback), in a buffer whose other bytes must stay as they were
SELFTEST = r"""
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include "ai_row_window.h"

static uint8_t a[512] __attribute__((aligned(8)));
static uint8_t b[512] __attribute__((aligned(8)));

int main(void) {
  static const uint32_t lens[] = {0, 1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 81, 93, 102, 114, 342, 384};
  uint32_t bad = 0, cases = 0;
  for (uint32_t li = 0; li < sizeof lens / sizeof lens[0]; ++li) {
    for (uint32_t so = 40; so < 48; ++so) {
      for (int32_t dist = -3; dist <= 40; ++dist) {
        const uint32_t n = lens[li], d = (uint32_t)((int32_t)so - dist);
        for (uint32_t i = 0; i < sizeof a; ++i) {
          a[i] = b[i] = (uint8_t)(i * 37u + 11u + li);
        }
        ai_rows_move(a + d, a + so, n);
        memmove(b + d, b + so, n);
        ++cases;
        if (memcmp(a, b, sizeof a) != 0) {
          ++bad;
          printf("case bad n=%u so=%u dist=%d\n", (unsigned)n, (unsigned)so, (int)dist);
        }
      }
    }
  }
  printf("case done %u %u\n", (unsigned)cases, (unsigned)bad);
  return 0;
}
"""


def _check(lines: list[list[str]]) -> None:
    assert [w for w in lines if w[1] == "bad"] == []
    done = [w for w in lines if w[1] == "done"]
    assert done and int(done[0][2]) == 17 * 8 * 44 and int(done[0][3]) == 0


def test_rows_move_host(tmp_path: Path) -> None:
    (tmp_path / "t.c").write_text(SELFTEST)
    exe = tmp_path / "t"
    subprocess.run(["cc", *WARN, "-Wconversion", f"-I{RUNTIME / 'include'}", str(tmp_path / "t.c"),
                    str(RUNTIME / "src" / "ai_runtime_rows.c"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    _check([ln.split() for ln in out.splitlines() if ln.startswith("case")])


@pytest.mark.slow
def test_rows_move_cortex_m4(tmp_path: Path) -> None:
    from conftest import run_m4_selftest

    dis, lines = run_m4_selftest(tmp_path, SELFTEST, ["ai_runtime_rows.c"])
    assert "<ai_rows_move>:" in dis
    _check(lines)
