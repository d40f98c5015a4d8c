"""A query's dense vector does not depend on what else is embedded with it (query_vectors.embed_queries):
the same request gets the same vector, hence the same selection, in every process."""

from __future__ import annotations

from selection.serving import query_vectors as services

QUERY = "latency budget for the search page"
# longer than the query: in one batch the query would be padded to its length
OBJECTIVE = "make the design review faster and cheaper to run for everyone involved"


def test_a_query_embeds_the_same_beside_its_objective_as_alone():
    services.embed_cache_clear()
    try:
        together = services.embed_queries([QUERY, OBJECTIVE])
        services.embed_cache_clear()
        alone = services.embed_queries([QUERY])
        services.embed_cache_clear()
        objective_alone = services.embed_queries([OBJECTIVE])
    finally:
        services.embed_cache_clear()
    assert together[0] == alone[0]
    assert together[1] == objective_alone[0]
