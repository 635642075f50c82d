"""rods environment executor: BFCL multi-turn tasks executed through a restricted parser."""
