"""The command line, `graphrag-dag` (docs/cli.md): `main.py` parses and dispatches; the other
modules hold the commands by kind and what they print."""
