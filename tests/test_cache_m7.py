"""Cortex-M7 memory system (stm32ai/estimate/cache.py): L1 cache geometry and LRU, TCMs, flash
wait states from the board's clock, hand-computed cases."""

from __future__ import annotations

import pytest

from stm32ai.boards import load_board
from stm32ai.estimate.cache import AXI_OVERHEAD, Cache, M7MemorySystem
from stm32ai.estimate.cache import config_for as _config_for
from stm32ai.estimate.memsys import load_spec


def config_for(board):
    return _config_for(board, load_spec(board))


def test_cache_geometry_and_lru():
    c = Cache(4096, 4)                       # F746 D-cache: 4 KB, 4 ways, 32-byte lines -> 32 sets
    assert c.sets == 32
    way_stride = 32 * 32                     # addresses 1 KB apart share a set
    for k in range(4):
        assert not c.access(0x20010000 + k * way_stride)
    assert all(c.access(0x20010000 + k * way_stride + 4) for k in range(4))
    assert not c.access(0x20010000 + 4 * way_stride)          # fifth line evicts the LRU (k = 0)
    assert not c.access(0x20010000)
    assert c.access(0x20010000 + 3 * way_stride)               # k = 3 was used after k = 0
    with pytest.raises(ValueError):
        Cache(3000, 4)


def test_dirty_eviction_counts_a_write_back():
    c = Cache(64, 1, line=32)                # 2 sets, direct mapped
    c.access(0x0, write=True)
    c.access(0x40)                           # same set: evicts the dirty line
    assert c.writebacks == 1


def test_f746_latencies_from_wait_states():
    board = load_board("disco-f746")
    m = M7MemorySystem(config_for(board))
    flash_miss = (board.clock.flash_latency + 1) * 1 + AXI_OVERHEAD      # 7 WS, AXI at the core clock
    assert m.read(0x08000100, 4) == flash_miss
    assert m.read(0x08000104, 4) == 0                                    # same line: hit
    assert m.read(0x20000000, 4) == 0 and m.write(0x20000004, 4) == 0    # DTCM
    assert m.write(0x20010000, 4) == 1 + AXI_OVERHEAD                    # SRAM1 write miss allocates
    assert m.write(0x20010004, 4) == 0 and m.read(0x20010008, 4) == 0   # now cached (write-back)
    assert m.fetch(0x08000200, 2) == flash_miss and m.fetch(0x08000202, 4) == 0
    assert m.fetch(0x00000100, 2) == 0                                   # ITCM
    assert m.bytes_read("flash") == 8 and m.bytes_filled("flash") == 64
    assert m.bytes_read("dtcm") == 4 and m.bytes_read("sram1") == 4


def test_h743_flash_behind_a_half_speed_axi():
    board = load_board("nucleo-h743zi")
    assert board.cpu_hz == 2 * board.hclk_hz
    m = M7MemorySystem(config_for(board))
    assert m.read(0x08000000, 4) == (board.clock.flash_latency + 1) * 2 + AXI_OVERHEAD
    assert m.read(0x24000000, 4) == 1 * 2 + AXI_OVERHEAD
    assert m.region(0x30000000).name == "sram123"
    assert m.read(0x30000000, 4) == (1 + 1) * 2 + AXI_OVERHEAD        # D2 SRAM: one more bus cycle


def test_i_cache_capacity_thrash_on_f746():
    m = M7MemorySystem(config_for(load_board("disco-f746")))
    # a loop body of 8 KB from flash does not fit the 4 KB I-cache: every line misses again
    lines = range(0x08000000, 0x08000000 + 8192, 32)
    first = sum(m.fetch(a, 4) > 0 for a in lines)
    second = sum(m.fetch(a, 4) > 0 for a in lines)
    assert first == second == 256
    m2 = M7MemorySystem(config_for(load_board("disco-f769")))            # 16 KB: fits
    sum(m2.fetch(a, 4) for a in lines)
    assert sum(m2.fetch(a, 4) > 0 for a in lines) == 0


def test_non_m7_board_refused():
    with pytest.raises(ValueError, match="no Cortex-M7 L1/TCM memory system"):
        config_for(load_board("nucleo-l4r5zi"))


def test_registered_as_the_m7_memory_system():
    from stm32ai.estimate.memsys import build_memory_system

    m = build_memory_system(load_board("disco-f746"))
    assert isinstance(m, M7MemorySystem) and "flash" in m.regions() and m.flash_regions() == ("flash",)
    m.read(0x08000000, 4)
    assert m.read_counters()[m.regions().index("flash")] == 4


@pytest.mark.slow
def test_ad_firmware_streams_its_weights_through_the_d_cache(tmp_path):
    """The AD autoencoder's demo firmware on nucleo-h743zi through `analyze --estimate`'s path
    (estimate_project): every weight byte (270 880 B, what `generate` reports) is read from flash
    once and, 16x larger than the D-cache, fetched into it from flash at least once; the estimate
    names the Cortex-M7 model."""
    import shutil

    pytest.importorskip("unicorn")
    if not (shutil.which("arm-none-eabi-gcc") and shutil.which("make")):
        pytest.skip("arm-none-eabi-gcc/make missing")
    from conftest import shared_model

    from stm32ai.cli import main
    from stm32ai.estimate.estimate import estimate_project, render_text

    board = load_board("nucleo-h743zi")
    out = tmp_path / "ad"
    assert main(["generate", str(shared_model("mlperf_tiny/ad01_int8.tflite")), "--board", board.id,
                 "-o", str(out)]) == 0
    est = estimate_project(out, board)
    weights = 270_880
    assert est.model.startswith("cortex-m7 + stm32h743xi flash 4 WS on AXIM + L1 16 KB I / 16 KB D")
    assert weights <= est.flash_bytes_read < weights + 4096        # weights + a few literals
    assert est.extra["flash_data_misses"] * 32 >= weights
    assert est.instructions / 2 <= est.cycles <= 3 * est.instructions   # dual issue bounds it below
    assert est.data_stall_cycles >= (weights // 32) * 12 * 0.9      # a 12-cycle fill per 32-byte line
    assert f"estimated_cycles: {est.cycles}" in render_text(est)
