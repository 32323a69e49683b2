"""One module per LSP feature; :func:`memlens_lsp.server.create_server` wires them."""
