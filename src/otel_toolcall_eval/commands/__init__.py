"""CLI command modules: each adds its subcommands with ``register(subparsers)``."""
