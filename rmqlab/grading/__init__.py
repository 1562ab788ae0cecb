"""rmqlab.grading: `rmqlab grade` — papermill extraction of the students' exercise functions, Spark
replays of hidden workloads, gradebook and feedback.

    rmqlab grade --submissions DIR --workloads DIR --out DIR [--master local[2]|spark://...] [--seeds N]
                 [--full-replay] [--time-limit S] [--notebook-time-limit S] [--memory-mb M]

    from rmqlab.grading.pipeline import GradeConfig, grade
    summary = grade(GradeConfig(submissions="subs/", workloads="hidden/", out="out/"))

What `--out DIR` receives:
- gradebook.csv: student, exercise, property, points, max_points, partial_credit, passed, total, finding
  (one row per student × exercise × property; the policy is rmqlab.grading.gradebook's docstring);
- totals.csv: student, points, max_points (the one column an LMS import usually wants);
- results.parquet: one row per (student, notebook, exercise, workload, seed, property): holds (null: not
  applicable), method ("reference-equivalent" | "replayed" | "error"), counterexample_id, detail;
- counterexamples.parquet: counterexample_id, exercise, signature, args, expected, got, property;
- findings.csv: student, notebook, kind, detail (nondeterministic, error, timeout, crashed,
  sandbox-violation, wrong-type, notebook-failed, missing-function);
- feedback/<student>.html (+ plotly.min.js once): what each property means, hints, the minimized
  counterexample, a re-labelled Lamport diagram; never the hidden workloads' names or paths;
- run.json: timings per phase, counts (reference runs, full replays, dedupe, determinism re-runs),
  per-notebook extraction and per-replay wall times, versions.

Students' code never runs in the grader's processes: the notebook's kernel and every function run in
fresh interpreters under bubblewrap (`jail`: the boundary, and what is only a courtesy); without a
working bwrap, grading refuses to run (exit status 3, with the install command).

Modules: extract (papermill + the jailed kernel of `kernel`; the jail is rmqlab.lab.exercises.jail),
tasks (what each Spark task does, and why "reference-equivalent" is sound), pipeline (the stages),
gradebook (policy + output files), feedback (HTML), minimize (counterexamples), samples (sample
submissions), cli. The Spark session and job runner are rmqlab.spark's.
"""
