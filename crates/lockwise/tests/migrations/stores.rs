//! A migrated store against a fresh one, on PostgreSQL and on MariaDB.

use super::*;

/// Panics, naming each object, unless `migrated` and `fresh` are the same catalog; and unless
/// the fresh one has every kind in `required`, so that a query that found nothing cannot pass.
pub(super) fn assert_same_catalog(migrated: &Catalog, fresh: &Catalog, required: &[&str]) {
    for kind in required {
        assert!(
            fresh.get(kind).is_some_and(|objects| !objects.is_empty()),
            "no {kind} found in the fresh store: {fresh:?}"
        );
    }
    let mut problems = Vec::new();
    let kinds: BTreeSet<&str> = migrated.keys().chain(fresh.keys()).copied().collect();
    let none = BTreeMap::new();
    for kind in kinds {
        let (old, new) = (
            migrated.get(kind).unwrap_or(&none),
            fresh.get(kind).unwrap_or(&none),
        );
        for (name, definition) in new {
            match old.get(name) {
                None => problems.push(format!("{kind} {name}: only in the fresh store")),
                Some(other) if other != definition => problems.push(format!(
                    "{kind} {name} differs: {}",
                    first_difference(other, definition)
                )),
                Some(_) => {}
            }
        }
        for name in old.keys().filter(|name| !new.contains_key(*name)) {
            problems.push(format!("{kind} {name}: only in the migrated store"));
        }
    }
    assert!(
        problems.is_empty(),
        "the migrated store differs from a fresh one:\n{}",
        problems.join("\n")
    );
}

/// The first line where `migrated` and `fresh` differ, both ways.
pub(super) fn first_difference(migrated: &str, fresh: &str) -> String {
    let (mut old, mut new) = (migrated.lines(), fresh.lines());
    for line in 1.. {
        match (old.next(), new.next()) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => return format!("line {line}: migrated {a:?}, fresh {b:?}"),
        }
    }
    unreachable!()
}

/// What the PostgreSQL catalog says of the objects of the schema `$1`, as `(name,
/// definition)` rows, kind by kind.
pub(super) const PG_CATALOG: &[(&str, &str)] = &[
    (
        "relation",
        "SELECT c.relname::text,
                format('kind %s, persistence %s, replica identity %s, options %s, partition of %s %s, partitioned by %s, acl %s',
                       c.relkind, c.relpersistence, c.relreplident, c.reloptions,
                       (SELECT p.relname FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
                         WHERE i.inhrelid = c.oid),
                       pg_get_expr(c.relpartbound, c.oid),
                       CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,
                       c.relacl)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c')",
    ),
    (
        "column",
        "SELECT c.relname || '.' || a.attname,
                format('position %s, %s, not null %s, default %s, identity %s, generated %s, collation %s',
                       row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                       format_type(a.atttypid, a.atttypmod), a.attnotnull,
                       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
                       co.collname)
           FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
           LEFT JOIN pg_collation co ON co.oid = a.attcollation
          WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped
            AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
    ),
    (
        "index",
        "SELECT c.relname::text,
                pg_get_indexdef(c.oid)
                || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END
                || coalesce(', partition of ' || (SELECT p.relname FROM pg_inherits h
                                                    JOIN pg_class p ON p.oid = h.inhparent
                                                   WHERE h.inhrelid = c.oid), '')
           FROM pg_index i
           JOIN pg_class c ON c.oid = i.indexrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1",
    ),
    (
        "constraint",
        "SELECT coalesce(c.relname::text, '') || '.' || co.conname,
                co.contype::text || ' ' || pg_get_constraintdef(co.oid)
                || CASE WHEN co.convalidated THEN '' ELSE ' NOT VALID' END
           FROM pg_constraint co
           JOIN pg_namespace n ON n.oid = co.connamespace
           LEFT JOIN pg_class c ON c.oid = co.conrelid
          WHERE n.nspname = $1",
    ),
    (
        "function",
        "SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
                pg_get_functiondef(p.oid) || E'\\n-- acl ' || coalesce(p.proacl::text, 'default')
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1",
    ),
    (
        "trigger",
        "SELECT c.relname || '.' || t.tgname,
                pg_get_triggerdef(t.oid) || ' (enabled ' || t.tgenabled::text || ')'
           FROM pg_trigger t
           JOIN pg_class c ON c.oid = t.tgrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND NOT t.tgisinternal",
    ),
    (
        "view",
        "SELECT c.relname::text, pg_get_viewdef(c.oid)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')",
    ),
    (
        "sequence",
        "SELECT c.relname::text,
                format('%s start %s increment %s min %s max %s cache %s cycle %s, owned by %s',
                       format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin,
                       s.seqmax, s.seqcache, s.seqcycle,
                       (SELECT r.relname || '.' || a.attname
                          FROM pg_depend d
                          JOIN pg_class r ON r.oid = d.refobjid
                          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                           AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
           FROM pg_sequence s
           JOIN pg_class c ON c.oid = s.seqrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1",
    ),
    (
        "type",
        "SELECT t.typname::text, t.typtype::text
           FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
          WHERE n.nspname = $1 AND t.typrelid = 0 AND t.typcategory <> 'A'",
    ),
];

/// The catalog of the PostgreSQL schema `schema`.
pub(super) async fn pg_catalog(pool: &PgPool, schema: &str) -> Catalog {
    let mut catalog = Catalog::new();
    for (kind, sql) in PG_CATALOG {
        let rows: Vec<(String, String)> = sqlx::query_as(*sql)
            .bind(schema)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("the {kind} query: {e}"));
        let objects = catalog.entry(kind).or_default();
        for (name, definition) in rows {
            let previous = objects.insert(
                name.replace(schema, "<store>"),
                definition.replace(schema, "<store>"),
            );
            assert!(previous.is_none(), "two {kind}s {name}");
        }
    }
    catalog
}

/// The migrations recorded as applied in the PostgreSQL schema `quoted`.
pub(super) async fn pg_applied(pool: &PgPool, quoted: &str) -> Vec<i32> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {quoted}.queue_migrations ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The queue `q` of `schema`, opened as a new process would: `connect` migrates it.
pub(super) async fn open_pg(schema: &PgSchema) -> Queue {
    lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default().queue("q").schema(schema.name()),
    )
    .await
    .expect("PostgreSQL is not reachable; run scripts/services")
}

/// A PostgreSQL schema as the first migration left it (the migrations table, migration 1 and
/// its row, filled in as the library fills them), holding a job in every state, migrates to
/// the schema a fresh store gets: same relations, columns, indexes, constraints, functions,
/// triggers, views, sequences and types, every migration on disk recorded in both; and every
/// old job is still there and goes on.
#[tokio::test]
pub(super) async fn a_version_1_postgres_store_with_jobs_migrates_to_the_schema_of_a_fresh_one() {
    let old = PgSchema::new("mig_v1");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(old.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let quoted = format!("\"{}\"", old.name());
    // The channel the library uses for the schema (the payload is the queue name).
    let channel = format!("{}_jobs", old.name());
    let fill = |sql: &str| {
        sql.replace("{channel}", &channel)
            .replace("{schema}", &quoted)
    };
    let version_1 = format!(
        "{}\n{}\nINSERT INTO {quoted}.queue_migrations (version) VALUES (1);\n{};",
        fill(include_str!(
            "../../sql/postgres/queue/migrations_table.sql"
        )),
        fill(include_str!("../../sql/postgres/queue/v1.sql")),
        insert_old_jobs(
            &format!("{quoted}.jobs"),
            "now() - interval '1 minute'",
            "now() + interval '1 hour'"
        ),
    );
    sqlx::raw_sql(AssertSqlSafe(version_1))
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(pg_applied(&pool, &quoted).await, [1]);
    let ids = old_ids(
        sqlx::query_as(AssertSqlSafe(format!(
            "SELECT id, payload->>'n' FROM {quoted}.jobs"
        )))
        .fetch_all(&pool)
        .await
        .unwrap(),
    );

    let q = open_pg(&old).await;
    let fresh = PgSchema::new("mig_fresh");
    let _fresh_queue = open_pg(&fresh).await;

    let on_disk = migration_files("postgres/queue").len();
    let every: Vec<i32> = (1..=i32::try_from(on_disk).unwrap()).collect();
    assert_eq!(pg_applied(&pool, &quoted).await, every, "migrated store");
    assert_eq!(
        pg_applied(&pool, &format!("\"{}\"", fresh.name())).await,
        every,
        "fresh store"
    );
    assert_same_catalog(
        &pg_catalog(&pool, old.name()).await,
        &pg_catalog(&pool, fresh.name()).await,
        &[
            "relation",
            "column",
            "index",
            "constraint",
            "function",
            "trigger",
            "view",
            "sequence",
        ],
    );

    old_jobs_go_on(&q, &ids).await;
}

/// What MariaDB's information_schema says of the table `?` of the current database, as
/// `(name, definition)` rows, kind by kind.
pub(super) const MYSQL_CATALOG: &[(&str, &str)] = &[
    (
        "table",
        "SELECT 'options', CAST(CONCAT_WS(' | ', engine, IFNULL(table_collation, '-'),
                                          IFNULL(row_format, '-'), IFNULL(create_options, '-'))
                                AS CHAR)
           FROM information_schema.tables
          WHERE table_schema = DATABASE() AND table_name = ?",
    ),
    (
        "column",
        "SELECT CAST(column_name AS CHAR),
                CAST(CONCAT_WS(' | ', ordinal_position, column_type, is_nullable,
                               IFNULL(column_default, 'no default'),
                               IFNULL(character_set_name, '-'), IFNULL(collation_name, '-'),
                               extra, column_key) AS CHAR)
           FROM information_schema.columns
          WHERE table_schema = DATABASE() AND table_name = ?",
    ),
    (
        "index",
        "SELECT CAST(CONCAT(index_name, ' #', seq_in_index) AS CHAR),
                CAST(CONCAT_WS(' | ', column_name, non_unique, IFNULL(sub_part, 'whole'),
                               nullable, index_type, IFNULL(collation, '-')) AS CHAR)
           FROM information_schema.statistics
          WHERE table_schema = DATABASE() AND table_name = ?",
    ),
];

/// The catalog of the MariaDB table `table`, with its `SHOW CREATE TABLE` (the counter of
/// AUTO_INCREMENT left out) as kind `create`.
pub(super) async fn mysql_catalog(pool: &MySqlPool, table: &str) -> Catalog {
    let mut catalog = Catalog::new();
    for (kind, sql) in MYSQL_CATALOG {
        let rows: Vec<(String, String)> = sqlx::query_as(*sql)
            .bind(table)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("the {kind} query: {e}"));
        let objects = catalog.entry(kind).or_default();
        for (name, definition) in rows {
            assert!(objects.insert(name.clone(), definition).is_none(), "{name}");
        }
    }
    let (_, create): (String, String) =
        sqlx::query_as(AssertSqlSafe(format!("SHOW CREATE TABLE `{table}`")))
            .fetch_one(pool)
            .await
            .unwrap();
    let create = create.replace(&format!("`{table}`"), "`<store>`");
    let create = match create.find(" AUTO_INCREMENT=") {
        Some(at) => {
            let rest = &create[at + " AUTO_INCREMENT=".len()..];
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            format!("{}{}", &create[..at], &rest[digits..])
        }
        None => create,
    };
    catalog
        .entry("create")
        .or_default()
        .insert("table".into(), create);
    catalog
}

/// A MariaDB table as the first migration created it, holding a job in every state, migrates
/// to the table a fresh store gets: same columns (type, nullability, default, character set,
/// collation), indexes and table options, each migration's mark present (the columns of 2 and
/// 3, the binary collation of 4); and every old job is still there and goes on.
#[tokio::test]
pub(super) async fn a_version_1_mariadb_table_with_jobs_migrates_to_the_table_of_a_fresh_one() {
    let db = MysqlDatabase::mysql("mig");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(&db.url())
        .await
        .expect("MariaDB is not reachable; run scripts/services");
    for sql in [
        include_str!("../../sql/mysql/queue/v1.sql").replace("{jobs}", "old_jobs"),
        insert_old_jobs(
            "old_jobs",
            "NOW(6) - INTERVAL 1 MINUTE",
            "NOW(6) + INTERVAL 1 HOUR",
        ),
    ] {
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let ids = old_ids(
        sqlx::query_as(
            "SELECT CAST(id AS SIGNED), CAST(JSON_VALUE(payload, '$.n') AS CHAR) FROM old_jobs",
        )
        .fetch_all(&pool)
        .await
        .unwrap(),
    );

    let open = |prefix: &'static str| {
        let url = db.url();
        async move {
            lockwise::queue::connect(&url, ConnectOptions::default().queue("q").schema(prefix))
                .await
                .expect("MariaDB is not reachable; run scripts/services")
        }
    };
    let q = open("old").await;
    let _fresh_queue = open("fresh").await;

    let migrated = mysql_catalog(&pool, "old_jobs").await;
    let fresh = mysql_catalog(&pool, "fresh_jobs").await;
    assert_same_catalog(&migrated, &fresh, &["table", "column", "index", "create"]);
    for column in ["started", "released_key"] {
        assert!(fresh["column"].contains_key(column), "{column}: {fresh:?}");
    }
    for (column, definition) in &fresh["column"] {
        let collation = definition.split(" | ").nth(5).unwrap();
        assert!(
            ["-", "utf8mb4_nopad_bin", "utf8mb4_0900_bin"].contains(&collation),
            "{column}: {definition}"
        );
    }

    old_jobs_go_on(&q, &ids).await;
}
