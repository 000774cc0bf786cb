"""What an expression's syntax says, looked at in bounded steps: the dotted name of an attribute
chain, a key two spellings of one expression share. A linted file may hold an expression nested
hundreds deep (generated code, or a hostile pull request): nothing here recurses, and each call
costs at most a fixed number of steps, so the lint stays linear in the size of the file.
"""

from __future__ import annotations

import ast


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None (asked for again and again: kept on
    the node, so the cache is the linted program's and goes with it)."""
    if node.__class__ is ast.Name:
        return node.id
    if node.__class__ is not ast.Attribute:
        return None
    got = getattr(node, "_dotted", None)
    if got is None:
        got = node._dotted = _dotted(node) or ""
    return got or None


MAX_DOTTED = 64  # attributes of a name that can mean an API; a longer chain is no name (and costs no more)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        if len(parts) == MAX_DOTTED:
            return None
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


MAX_KEY_NODES = 256  # an expression compared by its structure: larger ones are never alike


def source_key(node: ast.AST):
    """What two spellings of one expression share (its structure, as `ast.dump` gives it, without
    positions), for an expression of at most MAX_KEY_NODES nodes; a larger or deeper one gets a
    key of its own, equal to nothing but itself. Iterative and bounded: a file's expression nested
    thousands deep costs MAX_KEY_NODES steps, never the interpreter's stack."""
    parts, stack = [], [node]
    while stack:
        if len(parts) > MAX_KEY_NODES:
            return ("expression", id(node))  # (the program's nodes live as long as the lint)
        item = stack.pop()
        if isinstance(item, ast.AST):
            parts.append(item.__class__.__name__)
            stack += [v for _, v in reversed(list(ast.iter_fields(item)))]
        elif isinstance(item, list):
            parts.append(f"[{len(item)}")
            stack += reversed(item)
        else:
            parts.append(repr(item) if item.__class__ in (str, int, float, bool, bytes, complex) or item is None
                         or item is Ellipsis else item.__class__.__name__)
    return "\x00".join(parts)


def alike(a, b) -> bool:
    """Whether two expressions are the same but for their positions (as their `ast.dump`s would
    be), deciding at the first difference; two larger than MAX_KEY_NODES nodes are not alike."""
    stack, steps = [(a, b)], 0
    while stack:
        x, y = stack.pop()
        steps += 1
        if steps > MAX_KEY_NODES or x.__class__ is not y.__class__:
            return False
        if isinstance(x, ast.AST):
            stack += [(v, getattr(y, name, None)) for name, v in ast.iter_fields(x)]
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            stack += zip(x, y)
        elif x != y:
            return False
    return True


def members_key(node: ast.AST):
    """A rank list's source in a form two spellings of one literal list share (`list((1, 0))` and
    `[0, 1]`); a list comprehension's predicate (comprehension_members); else its source_key."""
    while isinstance(node, ast.Call) and dotted(node.func) in ("list", "tuple", "set") and node.args:
        node = node.args[0]
    found = comprehension_members(node)
    if found is not None:
        return found
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        consts = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(consts) == len(node.elts):
            return repr(sorted(consts, key=repr))
    return source_key(node)


def predicate_key(test: ast.AST, name: str):
    """A condition on one rank variable, the variable renamed: `r % 2 == parity` in a group's member
    list (`[r for r in range(world) if r % 2 == parity]`) and `rank % 2 == parity` in a branch share it."""
    import copy

    renamed = copy.deepcopy(test)
    for node in ast.walk(renamed):
        if isinstance(node, ast.Name) and node.id == name:
            node.id = "_rank_"
    return ("predicate", source_key(renamed))


def comprehension_members(node: ast.AST):
    """The predicate_key of a member list written `[r for r in range(...) if P(r)]`, else None."""
    if not (isinstance(node, ast.ListComp) and len(node.generators) == 1 and isinstance(node.elt, ast.Name)):
        return None
    gen = node.generators[0]
    if not (isinstance(gen.target, ast.Name) and gen.target.id == node.elt.id and len(gen.ifs) == 1
            and isinstance(gen.iter, ast.Call) and dotted(gen.iter.func) == "range"):
        return None
    return predicate_key(gen.ifs[0], gen.target.id)


def imported_name(mod, name: str | None) -> str | None:
    """`name` as a full dotted name through the module's imports (`dist.barrier` ->
    `torch.distributed.barrier`); unchanged when its head is not imported, None for no name."""
    if not name:
        return None
    head, _, rest = name.partition(".")
    full = mod.imports.get(head)
    return (full + ("." + rest if rest else "")) if full else name
