"""The package version, in a module of its own: the metrics, the judge and the CLI read it without importing the
package's top level (which would load the processor)."""

__version__ = "0.1.0"
