"""manage.py hnsw_index: build (or drop) pgvector's HNSW index for FG_DENSE_SEARCHER=pgvector-hnsw."""

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from selection.memory.hnsw.index import (
    DEFAULT_BUILD_MEMORY,
    DEFAULT_EF_CONSTRUCTION,
    DEFAULT_M,
    build_hnsw_index,
    drop_hnsw_index,
    embedding_dimensions,
)


class Command(BaseCommand):
    help = (
        "Build pgvector's HNSW index over the stored embeddings, one per vector dimension "
        "(CREATE INDEX CONCURRENTLY: imports and selections go on meanwhile). Refused, before any "
        "vector code runs, where this server's pgvector would crash on this CPU."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dimension", type=int, action="append",
                            help="vector dimension (repeatable; default: every stored one)")
        parser.add_argument("--m", type=int, default=DEFAULT_M, help=f"HNSW m (default {DEFAULT_M})")
        parser.add_argument("--ef-construction", type=int, default=DEFAULT_EF_CONSTRUCTION,
                            help=f"HNSW ef_construction (default {DEFAULT_EF_CONSTRUCTION})")
        parser.add_argument("--maintenance-work-mem", default=DEFAULT_BUILD_MEMORY,
                            help=f"memory for the build (default {DEFAULT_BUILD_MEMORY}; the graph "
                                 "is built far faster while it fits)")
        parser.add_argument("--drop", action="store_true", help="drop the index instead")

    def handle(self, *args, **options):
        dimensions = options["dimension"] or embedding_dimensions()
        if not dimensions:
            raise CommandError("no stored unit has an embedding: import a corpus first, or pass --dimension")
        for dimension in dimensions:
            try:
                if options["drop"]:
                    done = drop_hnsw_index(dimension=dimension)
                else:
                    done = build_hnsw_index(
                        dimension=dimension,
                        m=options["m"],
                        ef_construction=options["ef_construction"],
                        maintenance_work_mem=options["maintenance_work_mem"],
                    )
            except (ImproperlyConfigured, ValueError) as error:
                raise CommandError(str(error)) from error
            self.stdout.write(done)
