from django.db import migrations

from governance.db import append_only


class Migration(migrations.Migration):
    dependencies = [("selection", "0001_initial")]

    operations = [
        # HNSW over the default model's dimension (all-MiniLM-L6-v2, 384); queries cast the
        # column the same way so the planner can use it
        migrations.RunSQL(
            sql="""
            CREATE INDEX selection_memoryunit_embedding_hnsw_384
                ON selection_memoryunit
                USING hnsw ((embedding::vector(384)) vector_cosine_ops)
                WHERE vector_dims(embedding) = 384;
            """,
            reverse_sql="DROP INDEX IF EXISTS selection_memoryunit_embedding_hnsw_384;",
        ),
        append_only("selection_trace"),
        append_only("selection_tracecandidate"),
    ]
