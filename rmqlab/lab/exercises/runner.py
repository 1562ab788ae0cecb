"""`python -m rmqlab.lab.exercises.runner`: the fresh interpreter that serves one student's function
inside the grading sandbox (started by SandboxedFunction(jail=True) under bubblewrap; see
rmqlab.lab.exercises.jail). It reads the configuration frame and then the calls on stdin and answers on
stdout (the protocol is in rmqlab.lab.exercises.sandbox)."""

from rmqlab.lab.exercises.sandbox import runner_main

if __name__ == "__main__":
    runner_main()
