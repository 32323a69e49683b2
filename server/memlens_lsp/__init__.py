"""memlens language server (pygls): the only package that speaks LSP."""
