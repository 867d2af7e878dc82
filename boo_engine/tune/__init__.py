"""boo-tui tune: search tile sizes, flags and formulations for the kernels at hand, on the machine at hand."""
