"""boo-tui tune: search tile sizes, flags and formulations for the kernels at hand, on the machine at hand; and
(`defaults.py`, `tune --defaults`) the per-op-class default flags that fit this machine."""
