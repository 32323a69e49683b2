"""One module per LSP feature; :func:`memlens_server.server.create_server` wires them."""
