"""Cycle estimation: the generated firmware's instruction and data-address stream, run through a
model of the core and of the board's memory system (docs/estimate.md).

A stage of its own after the project generator: it reads a built firmware (ELF + linker map) and a
board file and returns estimated cycles; it never imports the compiler passes, and whatever a later
stage (the autotuner, placement choices) learns from it reaches the compiler as a file.

    isa.py      static decode of the firmware's Thumb code (capstone): one `Insn` per address
    model.py    the contracts between the trace, the memory system and the core timing models
    trace.py    the firmware under unicorn: boot, run to the measured region, trace it (Steps)
    memsys.py   the board's memory system (`memsys:` in boards/soc): flash + ART, SRAM
    core_m4.py  Cortex-M4 timing (TRM tables, load pipelining, branch refill)
    layers.py   which graph.json node each cycle belongs to (DWARF line of each kernel call)
    estimate.py orchestration and the report (`analyze --estimate`); core/memory registries
    coremark.py calibration: CoreMark through the estimator vs ST's published CoreMark/MHz
"""
