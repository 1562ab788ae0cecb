"""rmqlab.lab.exercises: the labs' exercises — their examples as data and the checkers that run a
student's function on them, safely (in a child process, with a time limit).

    from rmqlab.lab.exercises.truncation import check, PUBLIC_EXAMPLES   # lab 04
    report = check(truncation_point)          # a CheckReport: what passed, the first failure
"""
