"""The advisor's operand descriptions: what it accepts, and a clear error naming the field otherwise."""
import pytest

from tma_study.advisor.operand import OperandError, from_mapping

BOX = {"level": "l2", "shape": "box", "box_dims": [128, 64], "element_bytes": 2, "bytes_in_flight_per_sm": 65536}


def test_a_box_gives_its_own_transfer_size():
    op = from_mapping(BOX)
    assert op.bytes_per_transfer == 128 * 64 * 2 and op.box_dims == (128, 64) and op.consumer == "load_only"


def test_bytes_in_flight_from_stages_stage_bytes_and_ctas():
    spec = {k: v for k, v in BOX.items() if k != "bytes_in_flight_per_sm"}
    op = from_mapping({**spec, "stages": 4, "stage_bytes": 32768, "ctas_per_sm": 2})
    assert op.bytes_in_flight_per_sm == 4 * 32768 * 2


def test_a_dependent_operand_needs_no_bytes_in_flight():
    op = from_mapping({"level": "hbm", "shape": "gather", "row_bytes": 64, "pattern": "dependent"})
    assert op.bytes_in_flight_per_sm is None


@pytest.mark.parametrize("change, field", [
    ({"level": "dram"}, "level"),
    ({"shape": "strided"}, "shape"),
    ({"box_dims": None}, "box_dims"),
    ({"box_dims": [128, 7], "element_bytes": 2}, "box_dims"),     # 14-byte rows: not a TMA box
    ({"box_dims": [1, 2, 3, 4, 5, 6]}, "box_dims"),
    ({"element_bytes": 3}, "element_bytes"),
    ({"bytes_in_flight_per_sm": None}, "bytes_in_flight_per_sm"),
    ({"bytes_in_flight_per_sm": -4}, "bytes_in_flight_per_sm"),
    ({"bytes_per_transfer": 999}, "bytes_per_transfer"),
    ({"pattern": "random"}, "pattern"),
    ({"cluster_sharing": 32}, "cluster_sharing"),
    ({"cluster_sharing": 1.5}, "cluster_sharing"),
    ({"consumer": "mma"}, "mma_dtype"),
    ({"consumer": "mma", "mma_dtype": "bf16", "mma_tile": "128x128"}, "mma_tile"),
    ({"consumer": "compute"}, "flops_per_byte"),
    ({"consumer": "compute", "flops_per_byte": -1}, "flops_per_byte"),
    ({"row_bytes": 64}, "row_bytes"),
    ({"stages": 2}, "bytes_in_flight_per_sm"),
    ({"colour": "red"}, "colour"),
])
def test_a_wrong_field_is_named_with_what_is_allowed(change, field):
    spec = {k: v for k, v in {**BOX, **change}.items() if v is not None}
    with pytest.raises(OperandError, match=field):
        from_mapping(spec)


def test_gather_rows_must_be_whole_sixteen_byte_units():
    with pytest.raises(OperandError, match="row_bytes.*multiple of 16"):
        from_mapping({"level": "hbm", "shape": "gather", "row_bytes": 40, "bytes_in_flight_per_sm": 65536})


def test_an_operand_is_a_mapping():
    with pytest.raises(OperandError, match="mapping"):
        from_mapping(["hbm"])
