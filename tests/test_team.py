"""The threads a call runs on (include/cells/team.h), in C (tests/c/test_team.c): the parts'
claimed phases (include/cells/claims.h) let no part into a phase before the one before it is
complete, a call returns only when every part has finished and runs each part exactly once,
on 2 to 8 parts (more than the cores), a call that finds cells' team busy (from another thread,
or from inside a part) runs alone on its caller; in a process and in a child forked after its
threaded calls; a fork waits for the calls in flight. And the work a call claims
(include/cells/claims.h, tests/c/test_claims.c). Built as the extensions are, with OpenMP (the
threads then come from OpenMP's pool, and from cells' team in the child) and without (from
cells' team in both).

Compiled with the flags setup.py gives the extensions; skipped where no C compiler is found."""
import pytest
from c_programs import run_c_test


@pytest.mark.parametrize("openmp", [["-fopenmp"], []], ids=["with OpenMP", "without OpenMP"])
def test_the_threads_of_a_call(tmp_path, openmp):
    run = run_c_test("test_team", tmp_path, timeout=60, extra_flags=openmp)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "\n0 failures" in run.stdout, run.stdout


@pytest.mark.parametrize("openmp", [["-fopenmp"], []], ids=["with OpenMP", "without OpenMP"])
def test_the_work_a_call_claims(tmp_path, openmp):
    """include/cells/claims.h (tests/c/test_claims.c): on cells' team whether or not OpenMP is
    there, every task of every phase runs once and after the phase before it, and a part that
    starts late holds up no other."""
    run = run_c_test("test_claims", tmp_path, timeout=60, extra_flags=openmp)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 failures" in run.stdout, run.stdout
