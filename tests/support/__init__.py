"""What several test folders share: oracles of index rows, automaton invariants, scripted
models, decoding cases and the Ray cluster's worker side. (``tests/reference`` holds the
eager reference automata the product is checked against.)"""
