"""The TRL callback's import path before dashgen/formats/ (docs written before it import it from
here): dashgen.formats.trl_callback is the module."""

from dashgen.formats.trl_callback import StepLogCallback

__all__ = ["StepLogCallback"]
