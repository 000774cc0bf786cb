"""What a CI runner would act on in a job's output: the commands of GitHub Actions (its current
`::command` syntax at a line start and its older `##[command]` anywhere in a line, as the
runner's ActionCommand.TryParseV2 / TryParse read them) and of Azure Pipelines (`##vso[`
anywhere). A test of collcheck's output asserts that none appears, or only the ones it wrote."""

from __future__ import annotations

import re

# the runner's registered commands (ActionCommandManager's extensions)
GITHUB_COMMANDS = {"add-mask", "add-matcher", "remove-matcher", "add-path", "set-env", "set-output", "save-state",
                   "debug", "notice", "warning", "error", "group", "endgroup", "echo", "stop-commands",
                   "internal-set-repo-path"}
_LINES = re.compile(r"\r\n|\r|\n")  # (.NET's ReadLine)


def runner_commands(text: str) -> list[tuple[str, dict, str]]:
    """(command, properties, data) of each line of `text` a runner would act on."""
    found = []
    for line in _LINES.split(text):
        command = _v2(line) or _v1(line)
        if command is not None:
            found.append(command)
        elif "##vso[" in line:
            found.append(("vso", {}, line))
    return found


def _v2(line: str):
    line = line.lstrip()
    if not line.startswith("::"):
        return None
    end = line.find("::", 2)
    if end < 0:
        return None
    info = line[2:end]
    name, _, props = info.partition(" ")
    if name not in GITHUB_COMMANDS:
        return None
    properties = dict(p.split("=", 1) for p in props.strip().split(",") if "=" in p)
    return name, properties, line[end + 2:]


def _v1(line: str):
    start = line.find("##[")
    if start < 0:
        return None
    end = line.find("]", start)
    if end < 0:
        return None
    name, _, props = line[start + 3:end].partition(" ")
    if name not in GITHUB_COMMANDS:
        return None
    return name, dict(p.split("=", 1) for p in props.split(";") if "=" in p), line[end + 1:]
