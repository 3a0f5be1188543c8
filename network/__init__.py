"""The Reactor shared by the broker and the controller: an acceptor, processors (connection I/O and
framing), the RequestChannel, the request handler pool, and the outbound client."""
