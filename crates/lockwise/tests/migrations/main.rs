//! The queue's migrations are history: a store that the first migration created, holding jobs
//! in every state, migrates to exactly the schema a fresh store gets (on PostgreSQL its
//! relations, columns, indexes, constraints, functions, triggers and views; on MariaDB its
//! columns with their collations, its indexes and its table options), with every job carried
//! over and usable; and no migration file, which databases may have applied, ever changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use lockwise::queue::{ConnectOptions, Job, JobId, JobState, Queue};
use lockwise_testkit::{MysqlDatabase, PgSchema};
use serde_json::json;
use sha2::{Digest, Sha256};
use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, MySqlPool, PgPool};

/// Every migration file, as databases may have applied it: its SHA-256 (of the text with LF
/// line ends). A migration is never edited, only followed by a new one, which is pinned here
/// in the change that adds it.
const PINNED: &[(&str, &str)] = &[
    (
        "postgres/queue/v1.sql",
        "6a370995618e382428a61a1f38f104e01e01c0acbf77a4d425966361e3e9951f",
    ),
    (
        "postgres/queue/v2.sql",
        "920a05815228b162c444d78ad791ae9c7c7d5f55ad4f3ce2fdb82b49a58a97d5",
    ),
    (
        "postgres/queue/v3.sql",
        "0f70963d5c82bd301b685418fc3e78778c45c756d2cd8f6775ba92b956c0acd0",
    ),
    (
        "postgres/queue/v4.sql",
        "7ed727df374c9163c0832c45549cb6f396431f2733962d188f01560f456e8964",
    ),
    (
        "postgres/queue/v5.sql",
        "cf5b15f47e7370b0bb87c9042c7be92ae4570e68183081cbe0eef05365e880e8",
    ),
    (
        "postgres/queue/v6.sql",
        "638a078ba78f9a4fd0a8a1b313e471c5f09a39bb7bbb262bf312f8c7b39d6955",
    ),
    (
        "postgres/queue/v7.sql",
        "e568cd37cbf9544d831d2705821e21a65711bf5aa18bf3c256e9bbb88cb25954",
    ),
    (
        "postgres/queue/v8.sql",
        "41ad1477f4bf90cac605a0f04eb8b55d0a4f2a6cf02c8a511694d3e3043cac14",
    ),
    (
        "postgres/queue/v9.sql",
        "a95de5c60b369395b37f7152d8b7ad61964504b4b6a844e312b4d21c5cf2466c",
    ),
    (
        "postgres/queue/v10.sql",
        "0eebb71def7c1dba0d979a762a68c53c65dd79695e9d676ef5933d2725cf1570",
    ),
    (
        "postgres/queue/v11.sql",
        "83cd56e7b60cefeefdc111c7013f2553bc85aba2347f2cce9d94380a7c48f960",
    ),
    (
        "postgres/queue/v12.sql",
        "46d69efd2cc8e964107cd5c99e915d4bb8e8f2bf909eb9b0636c9afe854e1142",
    ),
    (
        "postgres/queue/v13.sql",
        "b0b62f8eab92f95c2ed796dfa4149a3eb345a2408488f9f7c67c9f2140bc6b44",
    ),
    (
        "postgres/queue/v14.sql",
        "4838960a7f6dc6de14578c5114dd001f91cf8a5eff64ee3cf455a65ea8995400",
    ),
    (
        "postgres/queue/v15.sql",
        "43a9f193adc1748f16ac4027326dc3eb6adc8536f9d2186acc63324a22f0c423",
    ),
    (
        "mysql/queue/v1.sql",
        "8366876deabe26f5a38ca21571bba72f778268b983af420828fa8d5da17377ff",
    ),
    (
        "mysql/queue/v2.sql",
        "c544a7a0817a05ad7882bf1de8f2c6c66d6f13bc14272c7b3b4f601c1ced9e5f",
    ),
    (
        "mysql/queue/v3.sql",
        "2b97317cc66f9a6f93230acbdbc4659982fe3bd51fe9d680bf4ae24ebbc8c5ec",
    ),
    (
        "mysql/queue/v4.sql",
        "e13c8283f2548ae6842d669cbd78f6cff98482d0bc47537c38f3b83e918bd5a5",
    ),
    (
        "mysql/queue/v5.sql",
        "0b0558ca8108d4e52562f3117e80d1d1ca43c387ecc7e6dbd6321c4d538f410d",
    ),
    (
        "mysql/queue/v6.sql",
        "f8db6bc9a95be832876d11a9a9f7b2a4c2882224f85422bb447ea9801c80d13f",
    ),
];

/// The crate's `sql/` folder.
fn sql_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
}

/// The migration files of `folder` (`postgres/queue`, `mysql/queue`): `v<N>.sql`, by N.
fn migration_files(folder: &str) -> Vec<(u32, String)> {
    let mut files: Vec<(u32, String)> = std::fs::read_dir(sql_dir().join(folder))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter_map(|name| {
            let n = name.strip_prefix('v')?.strip_suffix(".sql")?.parse().ok()?;
            Some((n, format!("{folder}/{name}")))
        })
        .collect();
    files.sort();
    files
}

mod jobs;
mod pins;
mod stores;
#[allow(unused_imports)]
use jobs::*;
#[allow(unused_imports)]
use pins::*;
#[allow(unused_imports)]
use stores::*;
