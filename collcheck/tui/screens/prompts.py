"""Modal screens: help (every key), a one-line prompt (search, go to rank), the group chooser."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from ...base.untrusted import one_line

KEYS = [
    ("o", "overview: run summary and final state of every rank"),
    ("t", "timelines: one column per rank (identical ranks folded)"),
    ("w", "wait-for view: who waits on whom, cycles, culprits and victims"),
    ("c", "communication time: per call site, stragglers and hints (collcheck stats)"),
    ("↑ ↓ ← →", "move the cursor (rows: matched collectives, columns: ranks)"),
    ("PgUp PgDn Home End", "scroll a page / go to the first or last row"),
    ("e / space", "expand a folded column (ranks 4-63) into one column per rank, or fold it back"),
    ("f", "jump to the first divergence (first finding)"),
    ("n / p", "next / previous finding"),
    ("g", "choose the group (or all groups merged in issue order)"),
    ("/", "search by op or call site (file:line, function, label) from the cursor on"),
    ("r", "go to a rank"),
    ("d / enter", "show / hide the detail pane of the selected event"),
    ("s", "step mode: the cursor walks one matched collective at a time, with every rank's state"),
    ("?", "this help"),
    ("q", "quit"),
]


class HelpScreen(ModalScreen):
    """Every key binding."""

    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "close")]

    def compose(self) -> ComposeResult:
        lines = "\n".join(f"[b]{k:>20}[/b]  {v}" for k, v in KEYS)
        with Vertical(id="help-box", classes="modal-box"):
            yield Label("[b]collcheck tui — keys[/b]  (escape closes)")
            yield Static(lines, id="help-text")


class PromptScreen(ModalScreen[str]):
    """One line of input; dismissed with the text (empty on escape)."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, placeholder: str = "") -> None:
        super().__init__()
        self.title_text, self.placeholder = title, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="modal-box prompt-box"):
            yield Label(self.title_text)
            yield Input(placeholder=self.placeholder, id="prompt-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss("")


class GroupScreen(ModalScreen[str]):
    """Choose a group; "*" stands for all groups merged."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, choices: list[tuple[str, str]], current: str) -> None:
        super().__init__()
        self.choices, self.current = choices, current

    def compose(self) -> ComposeResult:
        options = [Option(Text(one_line(text)), id=key) for key, text in self.choices]  # group names: data
        with Vertical(classes="modal-box"):
            yield Label("choose a group (enter selects, escape cancels)")
            ol = OptionList(*options, id="group-list")
            yield ol

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        keys = [k for k, _ in self.choices]
        ol.highlighted = keys.index(self.current) if self.current in keys else 0
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss("")
