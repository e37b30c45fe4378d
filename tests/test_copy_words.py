"""ai_copy_words (runtime/include/ai_simd.h): the word copies of the stripe calls (a conv member's
params, its staged rq rows and int8 weights; ai_conv_s8.c conv_stage_rows). n = 0..41 words
between word-aligned buffers at several word offsets, each against memcpy, the words around the
destination untouched and the source unchanged; on the host (memcpy) and on the Cortex-M4
(QEMU: the LDM/STM blocks of 8, 4, 2 words and the last word)."""

import subprocess
from pathlib import Path

import pytest
from conftest import RUNTIME, WARN

SELFTEST = r"""
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include "ai_simd.h"

static uint32_t src[64], dst[64], ref[64], keep[64];

/* out of line: one copy of the function, called with every n and offset */
__attribute__((noinline)) void copy_words(uint32_t *d, const uint32_t *s, uint32_t n) {
  ai_copy_words(d, s, n);
}

int main(void) {
  uint32_t bad = 0, cases = 0;
  for (uint32_t n = 0; n <= 41u; ++n) {
    for (uint32_t so = 0; so < 3u; ++so) {
      for (uint32_t dof = 0; dof < 3u; ++dof) {
        for (uint32_t i = 0; i < 64u; ++i) {
          src[i] = i * 2654435761u + n;
          dst[i] = ref[i] = 0xA5A5A5A5u ^ (i * 40503u);
          keep[i] = src[i];
        }
        copy_words(dst + 8 + dof, src + 4 + so, n);
        memcpy(ref + 8 + dof, src + 4 + so, (size_t)n * 4u);
        ++cases;
        if (memcmp(dst, ref, sizeof dst) != 0 || memcmp(src, keep, sizeof src) != 0) {
          ++bad;
          printf("case bad n=%u so=%u do=%u\n", (unsigned)n, (unsigned)so, (unsigned)dof);
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
    assert done and int(done[0][2]) == 42 * 3 * 3 and int(done[0][3]) == 0


def test_copy_words_host(tmp_path: Path) -> None:
    (tmp_path / "t.c").write_text(SELFTEST)
    exe = tmp_path / "t"
    subprocess.run(["cc", *WARN, "-Wconversion", f"-I{RUNTIME / 'include'}", str(tmp_path / "t.c"), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    _check([ln.split() for ln in out.splitlines() if ln.startswith("case")])


@pytest.mark.slow
def test_copy_words_cortex_m4(tmp_path: Path) -> None:
    from conftest import run_m4_selftest

    dis, lines = run_m4_selftest(tmp_path, SELFTEST, [])
    body = dis[dis.index("<copy_words>:"):]
    body = body[:body.index("\n\n")]
    assert "ldmia" in body and "stmia" in body
    _check(lines)
