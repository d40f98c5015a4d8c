"""Memory as stored: corpora, projects, units, links and their embeddings; import, export, uploads,
erasure, local overlays, the index."""
