"""The Reactor: an acceptor, processors (connection I/O and framing) and the RequestChannel."""
