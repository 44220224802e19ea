"""The ways into and out of a namespace: the indexer, the Microsoft GraphRAG importer and
exporter, and the demo corpus."""
