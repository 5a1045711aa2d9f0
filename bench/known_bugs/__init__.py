"""Known public reconcile bugs of real operators, built from source for bench_known_bugs."""
