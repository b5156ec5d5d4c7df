"""`python -m toolkit SUBCOMMAND`: thin command-line shells over the notebook vocabulary."""
