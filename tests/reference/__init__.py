"""Reference implementations that the tests use as oracles (never imported by formcast)."""
