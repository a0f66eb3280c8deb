"""`python -m adapters.cli`: the letterlog command line."""

from adapters.cli.app import main

main()
