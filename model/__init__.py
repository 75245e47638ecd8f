"""ledgercheck's model: spec loading and validation, the executable interpreter, the Z3
encoding, bounded model checking and the command line."""
