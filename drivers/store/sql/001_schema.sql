-- Core tables. Every row carries its namespace; every primary key starts with it.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS namespaces (
    namespace      text PRIMARY KEY,
    embed_model    text NOT NULL,
    embed_dim      integer NOT NULL,
    index_version  text NOT NULL,
    source         text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS documents (
    namespace  text NOT NULL,
    id         text NOT NULL,
    title      text NOT NULL DEFAULT '',
    text       text NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, id)
);

CREATE TABLE IF NOT EXISTS chunks (
    namespace    text NOT NULL,
    id           text NOT NULL,
    document_id  text,
    parent_id    text,
    kind         text NOT NULL,
    text         text NOT NULL,
    start_char   integer,
    end_char     integer,
    embedding    vector,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX IF NOT EXISTS chunks_parent_idx ON chunks (namespace, parent_id);

CREATE TABLE IF NOT EXISTS entities (
    namespace    text NOT NULL,
    id           text NOT NULL,
    name         text NOT NULL,
    name_key     text NOT NULL,
    type         text NOT NULL DEFAULT '',
    description  text NOT NULL DEFAULT '',
    degree       integer NOT NULL DEFAULT 0,
    synthesized  boolean NOT NULL DEFAULT false,
    embedding    vector,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX IF NOT EXISTS entities_name_key_idx ON entities (namespace, name_key);

CREATE TABLE IF NOT EXISTS entity_aliases (
    namespace  text NOT NULL,
    entity_id  text NOT NULL,
    alias      text NOT NULL,
    alias_key  text NOT NULL,
    PRIMARY KEY (namespace, entity_id, alias)
);
CREATE INDEX IF NOT EXISTS entity_aliases_key_idx ON entity_aliases (namespace, alias_key);

CREATE TABLE IF NOT EXISTS edges (
    namespace    text NOT NULL,
    id           text NOT NULL,
    source_id    text NOT NULL,
    target_id    text NOT NULL,
    weight       double precision NOT NULL DEFAULT 1,
    description  text NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, id)
);
CREATE INDEX IF NOT EXISTS edges_source_idx ON edges (namespace, source_id, weight DESC);
CREATE INDEX IF NOT EXISTS edges_target_idx ON edges (namespace, target_id, weight DESC);

CREATE TABLE IF NOT EXISTS communities (
    namespace  text NOT NULL,
    id         text NOT NULL,
    level      integer NOT NULL,
    parent_id  text,
    title      text NOT NULL DEFAULT '',
    is_leaf    boolean NOT NULL DEFAULT true,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX IF NOT EXISTS communities_parent_idx ON communities (namespace, parent_id);
CREATE INDEX IF NOT EXISTS communities_level_idx ON communities (namespace, level);

CREATE TABLE IF NOT EXISTS community_members (
    namespace     text NOT NULL,
    community_id  text NOT NULL,
    entity_id     text NOT NULL,
    PRIMARY KEY (namespace, community_id, entity_id)
);
CREATE INDEX IF NOT EXISTS community_members_entity_idx ON community_members (namespace, entity_id);

CREATE TABLE IF NOT EXISTS community_summaries (
    namespace     text NOT NULL,
    community_id  text NOT NULL,
    level         integer NOT NULL,
    is_leaf       boolean NOT NULL,
    title         text NOT NULL DEFAULT '',
    summary       text NOT NULL DEFAULT '',
    full_content  text NOT NULL DEFAULT '',
    rank          double precision,
    findings      jsonb NOT NULL DEFAULT '[]',
    embedding     vector,
    PRIMARY KEY (namespace, community_id)
);
CREATE INDEX IF NOT EXISTS community_summaries_level_idx ON community_summaries (namespace, level);

CREATE TABLE IF NOT EXISTS claims (
    namespace    text NOT NULL,
    id           text NOT NULL,
    subject_id   text NOT NULL,
    object_id    text,
    type         text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT '',
    description  text NOT NULL DEFAULT '',
    start_date   text,
    end_date     text,
    source_text  text NOT NULL DEFAULT '',
    document_id  text,
    chunk_id     text,
    start_char   integer,
    end_char     integer,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX IF NOT EXISTS claims_subject_idx ON claims (namespace, subject_id);
