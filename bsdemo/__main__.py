"""`python -m bsdemo ...`: the command-line companion (see bsdemo.cli)."""

from bsdemo.cli import main

raise SystemExit(main())
