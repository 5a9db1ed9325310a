"""Developer tools that stand below the tests and the benchmarks (both import them)."""
