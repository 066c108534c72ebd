"""The families' declaration (include/cells/family_rows.h) as everything reads it: the names
and fields Python gets from the compiled table, the GPU kernels' sources and phases derived
from it, and the C check that a row's phases follow from its blocks."""
import os
import shutil
import subprocess
import sysconfig

import pytest

from c_programs import FLAGS, ROOT
from cells import _family_table, cuda

NAMES = list(_family_table.FAMILIES)


def test_the_names_index_the_table_in_its_order():
    assert list(_family_table.FAMILIES.values()) == list(range(len(NAMES)))


@pytest.mark.parametrize("name", NAMES)
def test_a_family_has_two_phases_exactly_where_some_blocks_multiply_aux(name):
    fam = _family_table.family(name)
    assert fam.phases == (2 if fam.h_blocks < fam.gates else 1)
    assert (fam.param_grad is None) == (fam.param_blocks == 0)
    assert fam.recurrent_product or fam.aux_grad_block < 0  # no dL/dWh to keep in aux


def test_the_gpu_backend_has_kernels_for_every_family():
    assert cuda.GPU_FAMILIES == NAMES
    assert list(cuda.KERNEL_SOURCES) == list(cuda.KERNEL_PHASES) == NAMES


@pytest.mark.parametrize("name", cuda.GPU_FAMILIES)
def test_the_kernels_source_defines_the_familys_kernels(name):
    """cells.cuda's KERNEL_SOURCES names a source that instantiates the family's row, and
    KERNEL_PHASES lists a second phase's kernels exactly for two-phase families."""
    source = cuda.KERNELS_DIR / f"{cuda.KERNEL_SOURCES[name]}.cu"
    assert f"#define CELLS_FAMILY_ROW CELLS_FAMILY_{name.upper()}\n" in source.read_text()
    second = ("forward_b", "backward_b") if _family_table.family(name).phases == 2 else ()
    assert cuda.KERNEL_PHASES[name] == ("forward", "backward", *second)


RNN_FIELDS = ["(name, rnn)", "(steps, rnn)", "(source, rnn)", "(gates, 1)", "(cell_state, 0)",
              "(h_blocks, 1)", "(phases, 1)", "(aux, 0)", "(aux_kept, 0)",
              "(aux_grad_block, -1)", "(param_blocks, 0)", "(param_grad, NONE)",
              "(projects, 0)", "(row_reduction, 0)", "(recurrent_product, 1)"]


def compile_with_rnn_row(tmp_path, fields):
    """Compile families.h with the RNN's row replaced by `fields`: the compiler's result."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    source = tmp_path / "row.c"
    source.write_text('#include "cells/family_rows.h"\n'
                      "#undef CELLS_FAMILY_RNN\n"
                      f"#define CELLS_FAMILY_RNN {', '.join(fields)}\n"
                      '#include "cells/families.h"\n'
                      "int main(void) { return 0; }\n")
    return subprocess.run([*cc, *FLAGS, "-I", str(ROOT / "include"), "-c", str(source), "-o",
                           str(tmp_path / "row.o")], capture_output=True, text=True)


def test_the_rnn_row_as_written_here_compiles(tmp_path):
    assert compile_with_rnn_row(tmp_path, RNN_FIELDS).returncode == 0


def test_a_row_whose_phases_contradict_its_blocks_does_not_compile(tmp_path):
    build = compile_with_rnn_row(tmp_path, [f.replace("(phases, 1)", "(phases, 2)")
                                            for f in RNN_FIELDS])
    assert build.returncode != 0 and "cells_phases_of_RNN" in build.stderr


def test_a_field_in_another_fields_place_does_not_compile(tmp_path):
    """Two fields swapped (gates and cell_state): each accessor finds the other's name."""
    fields = list(RNN_FIELDS)
    fields[3], fields[4] = fields[4], fields[3]
    build = compile_with_rnn_row(tmp_path, fields)
    assert build.returncode != 0 and "CELLS_FAMILY_FIELD_gates_cell_state" in build.stderr
