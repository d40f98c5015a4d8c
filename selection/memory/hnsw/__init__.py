"""Dense search in PostgreSQL with pgvector's HNSW index (FG_DENSE_SEARCHER=pgvector-hnsw): the
searcher (searcher.py), the index and the checks that decide whether this server may use it
(index.py), and the CPU and probe checks that keep an AVX-512 build from crashing the server
(support.py)."""
