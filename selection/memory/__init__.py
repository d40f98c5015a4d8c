"""Memory as stored: corpora, projects, units and links; import, export, uploads, erasure, local overlays, the index."""
