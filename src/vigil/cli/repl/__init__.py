"""The interactive terminal front end of ``vigil chat``: the REPL (:mod:`vigil.cli.repl.app`),
what it reads with (:mod:`vigil.cli.repl.reading`) and the streamed line it shows above its
prompt (:mod:`vigil.cli.repl.live`)."""

from vigil.cli.repl.app import Repl
from vigil.cli.repl.reading import ask_approval

__all__ = ["Repl", "ask_approval"]
