"""`python -m adapters.cli`: the letterlog command line (through the command server when one
is running)."""

from adapters.cli import main

main()
