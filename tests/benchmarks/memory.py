"""How much memory a process tree uses, as the benchmarks sample it.

Each process counts its proportional set size (PSS: its private pages plus its share of the pages
it shares), not its resident size. The resident sizes of a tree overcount whatever its processes
share, and a JVM shares a lot at the wrong moments: Hadoop's local file system runs `readlink` and
`chmod` as child processes, and each child, between its fork and its exec, shows the whole JVM's
resident size again. The race's resident-size sampler caught such a child on the 6 M-row group
aggregate: 2,733 MiB for a tree whose Python and JVM held 1,581 MiB together at that moment. PSS
adds up to the memory the tree really holds.
"""

from __future__ import annotations

import psutil

# How often the samplers read a process tree's memory. Reading a JVM's smaps_rollup takes the
# kernel 12-25 ms (it walks the whole address space, holding the JVM's memory map lock): every
# 0.1 s, that made `lockstep stream` on the race's 6 M-row file 5-7 s slower (58.4/55.5 s against
# 51.6/51.3 s sampled every second). A heap does not grow and shrink again within half a second.
SAMPLE_SECONDS = 0.5


def tree_memory(root: psutil.Process) -> int:
    """Bytes held by a process and all its descendants; 0 once the root has ended."""
    return process_memory(root) + descendants_memory(root)


def descendants_memory(root: psutil.Process) -> int:
    """Bytes held by a process's descendants (a Python driver's JVM); 0 once it has ended."""
    try:
        return sum(process_memory(process) for process in root.children(recursive=True))
    except psutil.Error:
        return 0


def process_memory(process: psutil.Process) -> int:
    """One process's proportional set size in bytes (its resident size where the system keeps no
    PSS); 0 when it ended between listing and sampling."""
    try:
        with open(f"/proc/{process.pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass  # not Linux, or a kernel before 4.14
    except (ProcessLookupError, PermissionError):
        return 0
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0
