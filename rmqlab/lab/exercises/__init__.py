"""rmqlab.lab.exercises: the labs' exercises — their examples as data, the checkers
that run a student's function on them safely (a sandboxed child process with a time limit), and
the simulator's decision points (rmqlab.common.decision_points) a student's function takes for grading.

    from rmqlab.lab.exercises import EXERCISES, SandboxedFunction
    ex = EXERCISES["truncation_point"]              # or elect_master, sync_state_set, transfer_ok, acting_master
    print(ex.check(truncation_point))               # the public examples: a CheckReport
    with SandboxedFunction(source, ex.function, jail=True) as fn:                          # bubblewrap
        run_workload(w, decision_points=ex.decision_points(fn, calls))   # the components ask fn

    from rmqlab.lab.exercises.truncation import check, PUBLIC_EXAMPLES   # lab 04, as before

Modules: sandbox (SandboxedFunction, StudentFunctionError), policy (install_sandbox_policy),
registry (Exercise, Example, CheckReport), and one per exercise: truncation (lab 04), election
(lab 02), sync_state_set (lab 03), transfer (lab 01), acting_master (lab 05).
"""

from rmqlab.lab.exercises.policy import SandboxPolicy, install_sandbox_policy
from rmqlab.lab.exercises.registry import CheckReport, Example, ExampleResult, Exercise, combine
from rmqlab.lab.exercises.sandbox import SandboxedFunction, StudentFunctionError
from rmqlab.lab.exercises import acting_master, election, sync_state_set, transfer, truncation  # noqa: E402

EXERCISES: dict[str, Exercise] = {ex.name: ex for ex in (truncation.EXERCISE, election.EXERCISE,
                                                          sync_state_set.EXERCISE, transfer.EXERCISE,
                                                          acting_master.EXERCISE)}


def exercises_of_lab(lab: str) -> list[Exercise]:
    """The exercises whose student cell is in labs/<lab>.ipynb."""
    return [ex for ex in EXERCISES.values() if ex.lab == lab]


__all__ = ["EXERCISES", "Exercise", "Example", "ExampleResult", "CheckReport", "SandboxedFunction",
           "StudentFunctionError", "install_sandbox_policy", "SandboxPolicy", "exercises_of_lab", "combine"]
