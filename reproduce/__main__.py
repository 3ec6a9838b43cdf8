"""`python -m reproduce ...` is the `dlrmbench` CLI (for machines where the console script is not installed)."""
from reproduce.cli import main

main()
