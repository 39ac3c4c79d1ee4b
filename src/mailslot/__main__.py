"""``python -m mailslot`` runs the command line."""

from mailslot.cli import main

main()
