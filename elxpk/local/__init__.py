"""`elxpk local run`: the bundled trainer on this machine, with simulated slices and injected faults.

- options.py: LocalRunOptions, the one validated source of truth for the command's flags
- resume.py: what an existing --run-dir holds, and what a resumed run will do
- view.py: the Rich live view, or plain event lines when stdout is not a terminal
- inprocess.py: pause-resume and resize, in this process (trainer.elastic.loop.train)
- supervisor.py: multi-controller, one process per slice, group restart like a JobSet
"""
