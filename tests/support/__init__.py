"""Test support shared by the suites and the benchmarks.

bench/ may import it; tests never import bench/.
"""
