"""The processes of an engine's tree: a root pid and its live descendants, with their roles.

What: `ProcessTree(root_pid, root_role).refresh()` lists the root and every descendant alive now
(psutil reads the parent of each process from /proc) and names each once by
`collectors.roles.role_of` from its argv; a process seen once keeps its first non-generic role
(vLLM retitles its children soon after they start, so a generic name is looked up again).
Why: py-spy, the /proc sampler and the evidence must agree on which process is which, for any
engine spikelens starts (its own, or vLLM's API server → EngineCore → workers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

from collectors.roles import read_cmdline, role_of


@dataclass
class ProcessTree:
    root_pid: int
    root_role: str
    roles: dict[int, str] = field(default_factory=dict)  # pid → role, every pid ever seen
    parents: dict[int, int] = field(default_factory=dict)  # pid → ppid

    def refresh(self) -> list[int]:
        """Pids alive now (root first); [] once the root is gone."""
        try:
            root = psutil.Process(self.root_pid)
            children = root.children(recursive=True)
        except psutil.Error:
            return []
        alive = [self.root_pid]
        for child in children:
            alive.append(child.pid)
            if child.pid not in self.parents:
                try:
                    self.parents[child.pid] = child.ppid()
                except psutil.Error:
                    pass
        for pid in alive:
            if pid not in self.roles or self.roles[pid].endswith(("child", "spawn_child")):
                argv = read_cmdline(pid)
                if argv:
                    self.roles[pid] = role_of(argv, pid == self.root_pid, self.root_role)
        return alive

    def role(self, pid: int) -> str:
        return self.roles.get(pid, f"{self.root_role}:child")
