"""`python -m bsdemo ...`: the command-line companion (see bsdemo.cli)."""

import os
import sys

from bsdemo.cli import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:  # e.g. `python -m bsdemo train | head`: the reader left, stop quietly
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 0
raise SystemExit(code)
