"""Boards layered on SoC files (boards/soc/<soc>.yaml), like Zephyr: the SoC holds the part's
facts, the board file only what the board adds; bad files get one clear line."""

import pytest
import yaml

from stm32ai.boards import Pin, boards_dir, list_boards, load_board, soc_dir
from stm32ai.cli import main
from stm32ai.errors import Stm32aiError

SOC_ONLY = {"family", "core", "fpu", "gpio", "irq_count", "uarts", "uart_regs"}


def test_every_stm32_board_names_its_soc_and_repeats_none_of_it():
    for b in list_boards():
        if b.family in ("mps2", "nrf51"):   # not STM32 parts: flat board files
            continue
        assert b.soc and (soc_dir() / f"{b.soc}.yaml").is_file(), b.id
        data = yaml.safe_load(b.path.read_text())
        assert not SOC_ONLY & set(data), (b.id, SOC_ONLY & set(data))
        assert set(data["console"]) <= {"instance", "tx", "rx", "baud", "vcp"}


def test_two_boards_one_soc():
    d, n = load_board("disco-f746"), load_board("nucleo-f746zg")
    assert d.soc == n.soc == "stm32f746xg"
    soc = yaml.safe_load((soc_dir() / "stm32f746xg.yaml").read_text())
    names = [r["name"] for r in soc["memory"]]
    assert [r.name for r in n.memory] == names                          # the SoC's map as it is
    assert [r.name for r in d.memory] == names + ["qspi", "sdram"]      # + the kit's external memories
    assert (d.core, d.fpu, d.irq_count, d.gpio) == (n.core, n.fpu, n.irq_count, n.gpio)
    assert d.console.instance == "USART1" and n.console.instance == "USART3"


def test_console_pins_take_the_socs_alternate_function():
    b = load_board("disco-l475-iot01")
    assert (b.console.tx, b.console.rx) == (Pin("B", 6, 7), Pin("B", 7, 7))   # DS10969: USART1 AF7
    assert b.console.base == 0x40013800 and b.console.regs == "isr_tdr"
    lp = load_board("nucleo-l4r5zi").console
    assert lp.kind == "lpuart" and lp.tx == Pin("G", 7, 8)


def test_omitted_region():
    nd = load_board("qemu-netduinoplus2")
    assert [r.name for r in nd.memory] == ["flash", "sram"]          # no CCM under QEMU 7.2


def _board(tmp_path, **changes) -> str:
    data = yaml.safe_load((boards_dir() / "disco-l475-iot01.yaml").read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    data["id"] = "my-board"
    f = tmp_path / "my-board.yaml"
    f.write_text(yaml.safe_dump(data))
    return str(f)


@pytest.mark.parametrize("change,message", [
    ({"soc": "stm32x999"}, "unknown SoC 'stm32x999' (known: "),
    ({"console": {"instance": "USART9", "tx": "PB6", "rx": "PB7"}}, "console.instance: "),
    ({"console": {"instance": "USART1", "tx": "PC4", "rx": "PB7"}},
     "console.tx: PC4 is not a USART1 TX pin on stm32l475xg (one of PA9, PB6)"),
    ({"console": {"instance": "USART1", "tx": "B6", "rx": "PB7"}}, "console.tx: 'B6' is not a pin name"),
    ({"console": {"instance": "USART1", "tx": "PB6", "rx": "PB7", "af": 7}}, "console: unknown key(s) af"),
    ({"omit_memory": ["sram9"]}, "omit_memory: sram9 is not a memory region of stm32l475xg"),
    ({"memory": {"name": "x"}}, "memory: expected a list"),
])
def test_bad_layered_board_files(tmp_path, capsys, change, message):
    f = _board(tmp_path, **change)
    with pytest.raises(Stm32aiError) as e:
        load_board(f)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert main(["boards"]) == 0 or True     # the shipped boards still load
    assert main(["analyze", "tests/fixtures/models/act_chain_int8.tflite", "--board", f]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_user_board_with_its_own_soc(tmp_path):
    soc = yaml.safe_load((soc_dir() / "stm32l475xg.yaml").read_text())
    soc["soc"] = "my-l475"
    soc["uarts"]["USART1"]["tx"]["PA9"] = 7
    (tmp_path / "soc").mkdir()
    (tmp_path / "soc" / "my-l475.yaml").write_text(yaml.safe_dump(soc))
    b = load_board(_board(tmp_path, soc="my-l475", console={"instance": "USART1", "tx": "PA9", "rx": "PA10"}))
    assert b.soc == "my-l475" and b.console.tx == Pin("A", 9, 7)
    soc["soc"] = "other"
    (tmp_path / "soc" / "my-l475.yaml").write_text(yaml.safe_dump(soc))
    with pytest.raises(Stm32aiError, match="does not match the file name 'my-l475.yaml'"):
        load_board(_board(tmp_path, soc="my-l475"))


def test_docs_name_every_schema_key():
    """The schema is declared once (boards.SCHEMA); docs/boards.md must document each key."""
    from pathlib import Path

    from stm32ai.boards import LAYERED_KEYS, SCHEMA

    doc = (Path(__file__).resolve().parents[1] / "docs" / "boards.md").read_text()
    missing = sorted({k for sec in SCHEMA.values() for k in sec} | set(LAYERED_KEYS))
    missing = [k for k in missing if k not in doc]
    assert not missing, missing


def test_bad_soc_file(tmp_path):
    soc = yaml.safe_load((soc_dir() / "stm32l475xg.yaml").read_text())
    soc["soc"] = "bad-soc"
    soc["irq_count"] = "many"
    (tmp_path / "soc").mkdir()
    (tmp_path / "soc" / "bad-soc.yaml").write_text(yaml.safe_dump(soc))
    with pytest.raises(Stm32aiError, match=r"bad-soc.yaml: irq_count: expected an integer, got 'many'"):
        load_board(_board(tmp_path, soc="bad-soc"))
    soc["irq_count"] = 82
    soc["uarts"]["USART1"]["colour"] = "red"
    (tmp_path / "soc" / "bad-soc.yaml").write_text(yaml.safe_dump(soc))
    with pytest.raises(Stm32aiError, match=r"uarts.USART1: unknown key\(s\) colour"):
        load_board(_board(tmp_path, soc="bad-soc"))
