"""Shape parameters and fixed values of the synthetic index."""

TABLES = (
    "entities",
    "relationships",
    "communities",
    "community_reports",
    "covariates",
    "text_units",
    "documents",
)
MARKER = "synth.json"  # identifies a folder this generator wrote (so it may be overwritten)
GENERATOR = "graphrag-dag synth"

# Shape parameters.
EDGES_PER_ENTITY = 3.0
UNITS_PER_ENTITY = 2.0
CLAIMS_PER_ENTITY = 1.0
UNITS_PER_DOCUMENT = 50
LEAF_SIZE = 8  # typical size of a deepest-level community
BRANCHING = 4  # typical number of children of a split community
ZIPF_EXPONENT = 0.8  # endpoint popularity ~ rank ** -exponent
PERIOD = "2025-01-01"  # fixed (not today's date) so output is reproducible
CREATION_DATE = "2025-01-01 00:00:00 +0000"
