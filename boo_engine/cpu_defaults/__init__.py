"""Per-op-class CPU flags: which iree-compile flags (and, for the `best` column, which formulation and build) a kind
of kernel gets on THIS machine. One concept, one home:

- `rules.py`: the op class of a kernel (`op_class`) and the built-in rules keyed on it and on the resolved CPU's
  features (`rule_flags`, `rule_formulation`, `rule_build`), each with the figures behind it;
- `table.py`: the per-machine table `boo-tui tune --defaults` measures (tune/defaults.py), keyed by the resolved
  CPU and the compiler build;
- `machine.py`: what applies here (`per_op_default_flags`: this machine's table, else the rules), the host CPU as
  the compiler resolves it (`host_cpu`), and what a run records of it (`defaults_in_use`).

Nothing measured on another CPU is a default: the rules name the CPU their figures come from, the table is this
machine's own. Importing the package imports none of its modules (targets.py, below it, needs none of them).
"""
